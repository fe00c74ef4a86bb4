/*
 * usrsctp_perf: the usrsctp side of scripts/sctp-bench.sh. One association over RFC 6951
 * UDP encapsulation, one direction, fixed message size, timed; the server prints what it
 * received. Same parameters as `softrnic sctp-perf` (message size, duration, buffers).
 *
 *   usrsctp_perf -s -U LOCAL_UDP -u REMOTE_UDP -p SCTP_PORT
 *   usrsctp_perf -c 127.0.0.1 -U LOCAL_UDP -u REMOTE_UDP -p SCTP_PORT -l LEN -t SECS
 *
 * Server output (one line, parsed by the script):
 *   usrsctp-result bytes=N secs=S mbps=X
 *
 * Build: cc -O2 -o usrsctp_perf usrsctp_perf.c -lusrsctp -lpthread
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <usrsctp.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void set_encaps(struct socket *s, uint16_t remote_udp) {
    struct sctp_udpencaps e;
    memset(&e, 0, sizeof(e));
    e.sue_address.ss_family = AF_INET;
    e.sue_port = htons(remote_udp);
    if (usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_REMOTE_UDP_ENCAPS_PORT, &e, sizeof(e)) < 0) {
        perror("SCTP_REMOTE_UDP_ENCAPS_PORT");
        exit(2);
    }
}

static void set_buffers(struct socket *s) {
    int rcv = 4 << 20, snd = 8 << 20;
    usrsctp_setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    usrsctp_setsockopt(s, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
}

int main(int argc, char **argv) {
    int server = 0, opt;
    const char *addr = "127.0.0.1";
    uint16_t local_udp = 9899, remote_udp = 9899, port = 5001;
    size_t len = 1400;
    double secs = 5.0;
    while ((opt = getopt(argc, argv, "sc:U:u:p:l:t:")) != -1) {
        switch (opt) {
        case 's': server = 1; break;
        case 'c': addr = optarg; break;
        case 'U': local_udp = (uint16_t)atoi(optarg); break;
        case 'u': remote_udp = (uint16_t)atoi(optarg); break;
        case 'p': port = (uint16_t)atoi(optarg); break;
        case 'l': len = (size_t)atol(optarg); break;
        case 't': secs = atof(optarg); break;
        default:
            fprintf(stderr, "usage: %s -s|-c ADDR [-U udp] [-u udp] [-p port] [-l len] [-t secs]\n", argv[0]);
            return 2;
        }
    }
    usrsctp_init(local_udp, NULL, NULL);
    usrsctp_sysctl_set_sctp_sendspace(8 << 20);
    usrsctp_sysctl_set_sctp_recvspace(4 << 20);
    struct socket *s = usrsctp_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (!s) {
        perror("usrsctp_socket");
        return 1;
    }
    set_buffers(s);
    set_encaps(s, remote_udp);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    char *buf = calloc(1, len > 65536 ? len : 65536);
    if (server) {
        sin.sin_addr.s_addr = htonl(INADDR_ANY);
        if (usrsctp_bind(s, (struct sockaddr *)&sin, sizeof(sin)) < 0 || usrsctp_listen(s, 1) < 0) {
            perror("bind/listen");
            return 1;
        }
        printf("usrsctp server listening on SCTP port %u, UDP %u\n", port, local_udp);
        fflush(stdout);
        struct socket *c = usrsctp_accept(s, NULL, NULL);
        if (!c) {
            perror("accept");
            return 1;
        }
        unsigned long long bytes = 0;
        double t0 = 0, t1 = 0;
        for (;;) {
            struct sockaddr_in from;
            socklen_t fromlen = sizeof(from), infolen = 0;
            unsigned int infotype = 0;
            int flags = 0;
            ssize_t n = usrsctp_recvv(c, buf, 65536, (struct sockaddr *)&from, &fromlen, NULL,
                                      &infolen, &infotype, &flags);
            if (n <= 0)
                break;
            if (bytes == 0)
                t0 = now_s();
            bytes += (unsigned long long)n;
            t1 = now_s();
        }
        double d = t1 > t0 ? t1 - t0 : 1e-9;
        printf("usrsctp-result bytes=%llu secs=%.3f mbps=%.1f\n", bytes, d, bytes * 8.0 / d / 1e6);
        usrsctp_close(c);
    } else {
        if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
            fprintf(stderr, "bad address %s\n", addr);
            return 2;
        }
        if (usrsctp_connect(s, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
            perror("connect");
            return 1;
        }
        struct sctp_sndinfo info;
        memset(&info, 0, sizeof(info));
        info.snd_ppid = htonl(0x53505244);
        double t0 = now_s();
        unsigned long long sent = 0;
        while (now_s() - t0 < secs) {
            ssize_t n = usrsctp_sendv(s, buf, len, NULL, 0, &info, sizeof(info), SCTP_SENDV_SNDINFO, 0);
            if (n < 0) {
                perror("sendv");
                return 1;
            }
            sent += (unsigned long long)n;
        }
        printf("usrsctp client sent %llu bytes\n", sent);
    }
    usrsctp_close(s);
    while (usrsctp_finish() != 0)
        sleep(1);
    return 0;
}
