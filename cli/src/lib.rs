//! softrnic command-line library
