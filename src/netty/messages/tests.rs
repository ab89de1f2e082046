//! The hex examples of NETTY.md §7 (produced by the Java encoders) as fixtures: each decodes to
//! the documented fields and re-encodes to the same bytes.

use bytes::Bytes;

use super::*;
use crate::netty::frame::{Header, HEADER_LEN};

fn hex(s: &str) -> Vec<u8> {
    let clean: String = s
        .split_whitespace()
        .filter(|w| *w != "|")
        .collect::<Vec<_>>()
        .concat();
    ::hex::decode(clean).unwrap()
}

/// Splits a whole frame into (type, message, body), checking the header.
fn split(frame: &[u8]) -> (i8, Bytes, Bytes) {
    let h = Header::parse(frame, usize::MAX).unwrap();
    assert_eq!(frame.len(), HEADER_LEN + h.payload_len(), "frame length");
    let all = Bytes::copy_from_slice(frame);
    (
        h.ty,
        all.slice(HEADER_LEN..HEADER_LEN + h.msg_len),
        all.slice(HEADER_LEN + h.msg_len..),
    )
}

fn request_round_trip(frame: &[u8]) -> Request {
    let (t, msg, _) = split(frame);
    let req = Request::decode(t, msg).unwrap();
    assert_eq!(&req.encode()[..], frame, "re-encoded {req:?}");
    req
}

fn response_round_trip(frame: &[u8]) -> Response {
    let (t, msg, body) = split(frame);
    let resp = Response::decode(t, msg, body).unwrap();
    assert_eq!(&resp.encode()[..], frame, "re-encoded {resp:?}");
    resp
}

const TS: i64 = 1_700_000_000_000;

#[test]
fn index_request() {
    let f = hex("00 00 00 1f  04  00 00 00 00
        00 00 00 00 00 00 00 07  00 00 00 03 61 70 70
        00 00 00 01  00 00 00 02  00 00 00 01  00 00 00 0a");
    assert_eq!(
        request_round_trip(&f),
        Request::Index(IndexRequest {
            request_id: 7,
            app_id: "app".into(),
            shuffle_id: 1,
            partition_id: 2,
            partition_num_per_range: 1,
            partition_num: 10,
        })
    );
}

#[test]
fn data_requests_v1_v2_v3() {
    let v1 = "00 00 00 33 05 00 00 00 00  00 00 00 00 00 00 00 08  00 00 00 03 61 70 70
        00 00 00 01 00 00 00 02 00 00 00 01 00 00 00 0a  00 00 00 00 00 00 00 28  00 00 00 64
        00 00 01 8b cf e5 68 00";
    let base = DataRequest {
        version: DataVersion::V1,
        request_id: 8,
        app_id: "app".into(),
        shuffle_id: 1,
        partition_id: 2,
        partition_num_per_range: 1,
        partition_num: 10,
        offset: 40,
        length: 100,
        timestamp: TS,
        storage_id: -1,
        next_segments: vec![],
        task_attempt_id: 0,
    };
    assert_eq!(request_round_trip(&hex(v1)), Request::Data(base.clone()));

    let mut v2 = hex(v1);
    v2[3] = 0x37;
    v2[4] = 0x18;
    v2.extend(hex("00 00 00 00"));
    let want2 = DataRequest {
        version: DataVersion::V2,
        storage_id: 0,
        ..base.clone()
    };
    assert_eq!(request_round_trip(&v2), Request::Data(want2.clone()));

    let mut v3 = hex(v1);
    v3[3] = 0x53;
    v3[4] = 0x19;
    v3.extend(hex("00 00 00 00 | 00 00 00 01 | 00 00 00 00 00 00 00 8c 00 00 00 00 00 00 00 64 | 00 00 00 00 00 00 00 07"));
    assert_eq!(
        request_round_trip(&v3),
        Request::Data(DataRequest {
            version: DataVersion::V3,
            next_segments: vec![(140, 100)],
            task_attempt_id: 7,
            ..want2
        })
    );
}

#[test]
fn memory_request_with_and_without_bitmap() {
    let none = "00 00 00 2f 06 00 00 00 00  00 00 00 00 00 00 00 09  00 00 00 03 61 70 70
        00 00 00 01 00 00 00 02  ff ff ff ff ff ff ff ff  00 10 00 00  00 00 01 8b cf e5 68 00  ff ff ff ff";
    let base = MemoryRequest {
        request_id: 9,
        app_id: "app".into(),
        shuffle_id: 1,
        partition_id: 2,
        last_block_id: -1,
        read_buffer_size: 1 << 20,
        timestamp: TS,
        expected_task_ids: None,
    };
    assert_eq!(
        request_round_trip(&hex(none)),
        Request::Memory(base.clone())
    );

    let mut with = hex(none);
    with.truncate(with.len() - 4);
    with[3] = 0x4a;
    let bitmap =
        hex("00 00 00 00 01 00 00 00 00 3a 30 00 00 01 00 00 00 00 00 00 00 10 00 00 00 07 00");
    with.extend(hex("00 00 00 1b"));
    with.extend(&bitmap);
    let req = request_round_trip(&with);
    assert_eq!(
        req,
        Request::Memory(MemoryRequest {
            expected_task_ids: Some(Bytes::from(bitmap.clone())),
            ..base
        })
    );
    let ids = crate::codec::bitmap::decode(&bitmap).unwrap();
    assert_eq!(ids.iter().collect::<Vec<u64>>(), vec![7]);
}

#[test]
fn rpc_responses() {
    let f = hex("00 00 00 11 00 00 00 00 00  00 00 00 00 00 00 00 05  00 00 00 04  00 00 00 01 78");
    assert_eq!(
        response_round_trip(&f),
        Response::Rpc(ResponseHead {
            request_id: 5,
            status: crate::proto::StatusCode::NoRegister as i32,
            ret_message: Some("x".into()),
        })
    );
    let f = hex("00 00 00 10 00 00 00 00 00 00 00 00 00 00 00 00 05 00 00 00 00 ff ff ff ff");
    assert_eq!(
        response_round_trip(&f),
        Response::Rpc(ResponseHead {
            request_id: 5,
            status: 0,
            ret_message: None,
        })
    );
}

fn ok(request_id: i64) -> ResponseHead {
    ResponseHead {
        request_id,
        status: 0,
        ret_message: Some("OK".into()),
    }
}

#[test]
fn index_responses_v1_and_v2() {
    let f = hex(
        "00 00 00 1a 0e 00 00 00 02  00 00 00 00 00 00 00 07  00 00 00 00  00 00 00 02 4f 4b
        00 00 00 00 00 00 00 7b  |  01 02",
    );
    assert_eq!(
        response_round_trip(&f),
        Response::Index {
            head: ok(7),
            data_file_len: 123,
            index: Bytes::from_static(&[1, 2]),
        }
    );
    let f = hex(
        "00 00 00 22 17 00 00 00 02 | 00 00 00 00 00 00 00 07  00 00 00 00  00 00 00 02 4f 4b
        00 00 00 00 00 00 00 7b | 00 00 00 01 00 00 00 00 | 01 02",
    );
    assert_eq!(
        response_round_trip(&f),
        Response::IndexV2 {
            head: ok(7),
            data_file_len: 123,
            storage_ids: vec![0],
            index: Bytes::from_static(&[1, 2]),
        }
    );
}

#[test]
fn memory_response() {
    let f = hex("00 00 00 3a 10 00 00 00 03  00 00 00 00 00 00 00 09  00 00 00 00  00 00 00 02 4f 4b
        00 00 00 01
        00 00 00 00 00 60 00 07  00 00 00 00  00 00 00 03  00 00 00 0a  00 00 00 00 00 00 ca fe  00 00 00 00 00 00 00 07
        09 09 09");
    assert_eq!(
        response_round_trip(&f),
        Response::Memory {
            head: ok(9),
            segments: vec![Segment {
                block_id: 6291463,
                offset: 0,
                length: 3,
                uncompress_length: 10,
                crc: 0xCAFE,
                task_attempt_id: 7,
            }],
            data: Bytes::from_static(&[9, 9, 9]),
        }
    );
}

#[test]
fn sorted_response() {
    let f = hex("00 00 00 1e 16 00 00 00 01 | 00 00 00 00 00 00 00 0c 00 00 00 00 00 00 00 02 4f 4b 00 00 00 00 00 00 00 01 00 00 00 00 | 05");
    assert_eq!(
        response_round_trip(&f),
        Response::Sorted {
            head: ok(12),
            next_block_id: 1,
            merge_state: 0,
            data: Bytes::from_static(&[5]),
        }
    );
}

/// The send example.
const SEND_EXAMPLE: &str = "00 00 00 80 03 00 00 00 00
    00 00 00 00 00 00 00 0b  00 00 00 03 61 70 70  00 00 00 01  00 00 00 00 00 00 00 2a
    00 00 00 01
    00 00 00 02  00 00 00 01
    00 00 00 02  00 00 00 00 00 60 00 07  00 00 00 03  00 00 00 01  00 00 00 00 00 00 ca fe
    00 00 00 00 00 00 00 07  00 00 00 03 09 09 09
    00 00 00 01  00 00 00 05 68 2d 31 2d 32  00 00 00 01 68  00 00 00 01  00 00 00 02
    00 00 00 0a  00 00 00 00 00 00 00 00
    00 00 01 8b cf e5 68 00";

#[test]
fn send_request() {
    let f = hex(SEND_EXAMPLE);
    assert_eq!(f.len(), HEADER_LEN + 128);
    let req = request_round_trip(&f);
    assert_eq!(
        req,
        Request::Send(SendRequest {
            request_id: 11,
            app_id: "app".into(),
            shuffle_id: 1,
            require_buffer_id: 42,
            partitions: vec![(
                2,
                vec![SendBlock {
                    partition_id: 2,
                    block_id: 6291463,
                    length: 3,
                    shuffle_id: 1,
                    crc: 0xCAFE,
                    task_attempt_id: 7,
                    data: Bytes::from_static(&[9, 9, 9]),
                    replicas: vec![Replica {
                        id: Some("h-1-2".into()),
                        host: Some("h".into()),
                        grpc_port: 1,
                        netty_port: 2,
                    }],
                    uncompress_length: 10,
                    free_memory: 0,
                }]
            )],
            timestamp: TS,
        })
    );
}

#[test]
fn truncated_or_lying_messages_are_errors_not_panics() {
    let f = hex(SEND_EXAMPLE);
    let (t, msg, _) = split(&f);
    // Every strict prefix of the message fails cleanly.
    for cut in 0..msg.len() {
        assert!(Request::decode(t, msg.slice(..cut)).is_err(), "cut {cut}");
    }
    // A data length past the end.
    let mut bad = msg.to_vec();
    let at = 8 + 7 + 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8 + 8; // block.dataLength
    bad[at..at + 4].copy_from_slice(&1000i32.to_be_bytes());
    assert!(matches!(
        Request::decode(t, Bytes::from(bad)),
        Err(FrameError::Overrun { .. })
    ));
    // A huge partition count is bounded by the bytes, not preallocated.
    let mut bad = msg.to_vec();
    bad[27..31].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(Request::decode(t, Bytes::from(bad)).is_err());
    assert!(matches!(
        Request::decode(2, msg),
        Err(FrameError::UnknownType(2))
    ));
}
