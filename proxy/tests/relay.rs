//! The tunnel relay under bulk load: every relay variant (splice or copy,
//! the jail-side send buffer capped or autotuned) must move many MiB each
//! way, at the same time, byte for byte, and count them in the close line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use oajail_proxy::Limits;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const DOWN: usize = 16 << 20;
const UP: usize = 4 << 20;
const BANNER: &[u8] = b"SSH-2.0-x\r\n";

/// Byte `i` of a stream: not periodic at any power of two, so a lost,
/// repeated or reordered chunk changes the checksum.
fn pattern(i: usize) -> u8 {
    ((i * 31 + i / 251) % 253) as u8
}

fn checksum(sum: &mut u64, offset: usize, data: &[u8]) {
    for (k, b) in data.iter().enumerate() {
        *sum = sum
            .wrapping_mul(0x100_0000_01b3)
            .wrapping_add(u64::from(*b) ^ ((offset + k) as u64));
    }
}

fn expected(len: usize) -> u64 {
    let data: Vec<u8> = (0..len).map(pattern).collect();
    let mut sum = 0;
    checksum(&mut sum, 0, &data);
    sum
}

/// Read to EOF in pieces of at most `chunk`, checksumming.
fn drain(s: &mut TcpStream, chunk: usize) -> (usize, u64) {
    let (mut buf, mut got, mut sum) = (vec![0u8; chunk], 0, 0);
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            return (got, sum);
        }
        checksum(&mut sum, got, &buf[..n]);
        got += n;
    }
}

/// Write `len` pattern bytes in odd-sized pieces, then half-close.
fn send(s: &mut TcpStream, len: usize) {
    let data: Vec<u8> = (0..len).map(pattern).collect();
    for piece in data.chunks(100_003) {
        s.write_all(piece).unwrap();
    }
    s.shutdown(Shutdown::Write).unwrap();
}

/// Upstream for one tunnel: after the banner, send `DOWN` bytes while
/// reading the upload to EOF; report the upload's length and checksum.
fn upstream() -> (u16, mpsc::Receiver<(usize, u64)>) {
    let listener = std::net::TcpListener::bind((public(6), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut banner = [0u8; BANNER.len()];
        s.read_exact(&mut banner).unwrap();
        let mut reader = s.try_clone().unwrap();
        let up = thread::spawn(move || drain(&mut reader, 7_919));
        send(&mut s, DOWN);
        let _ = tx.send(up.join().unwrap());
    });
    (port, rx)
}

fn bulk_both_ways(limits: Limits) {
    let (port, upload) = upstream();
    let lab = Lab::with(plan(&[&format!("bulk.lab.test:{port}")], &[]), limits);
    lab.resolver.map("bulk.lab.test", public(6));
    let (mut c, head) = connect(lab.proxy, &format!("bulk.lab.test:{port}"), BANNER);
    assert_eq!(status(&head), 200);
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut writer = c.try_clone().unwrap();
    let up = thread::spawn(move || send(&mut writer, UP));
    let (len, sum) = drain(&mut c, 1 << 20);
    up.join().unwrap();
    assert_eq!(len, DOWN, "download length");
    assert_eq!(sum, expected(DOWN), "download arrived intact");
    let (len, sum) = upload.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(len, UP, "upload length");
    assert_eq!(sum, expected(UP), "upload arrived intact");
    let close = lab.wait_log("close", 1);
    assert_eq!(close[0]["reason"], "closed");
    assert_eq!(close[0]["bytes_down"].as_u64(), Some(DOWN as u64));
    assert_eq!(
        close[0]["bytes_up"].as_u64(),
        Some((BANNER.len() + UP) as u64)
    );
}

#[test]
fn splice_with_the_default_send_buffer() {
    assert!(Limits::default().splice);
    assert_eq!(
        Limits::default().client_send_buffer,
        Some(oajail_proxy::CLIENT_SEND_BUFFER)
    );
    bulk_both_ways(Limits::default());
}

#[test]
fn splice_with_an_autotuned_send_buffer() {
    bulk_both_ways(Limits {
        client_send_buffer: None,
        ..Limits::default()
    });
}

#[test]
fn copy_with_the_default_send_buffer() {
    bulk_both_ways(Limits {
        splice: false,
        ..Limits::default()
    });
}

#[test]
fn copy_with_a_tiny_send_buffer() {
    bulk_both_ways(Limits {
        splice: false,
        relay_buffer: 4096,
        client_send_buffer: Some(4096),
        ..Limits::default()
    });
}
