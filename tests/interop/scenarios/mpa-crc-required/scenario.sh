# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# CRC required by siw (siw-variants/crc-required.patch: mpa_crc_required = true), softrnic without
# --crc: siw as initiator asks (C = 1) and softrnic's Reply echoes it -> CRC on. siw as responder
# does NOT add C = 1 to its Reply when the Request has C = 0 (siw_proc_mpareq only echoes the
# Request's C), so softrnic -> siw runs without CRC: that is siw's real behaviour, asserted here.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=crc-required
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "" --server-opts ""'
EXPECT_HOST_INITIATOR="rev=2,crc=off,p2p=off"
EXPECT_SIW_INITIATOR="rev=2,crc=on,p2p=off"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
