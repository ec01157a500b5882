use loadcell_core::ErrorClass;

use super::thrift::{message_len, REPLY};
use super::*;

fn parse(url: &str) -> Result<(String, u16), String> {
    parse_target(&Target::parse(url).unwrap()).map(|s| (s.host, s.port))
}

#[test]
fn the_target_names_the_gateway_and_nothing_else() {
    assert_eq!(parse("hbase+thrift://h:19090"), Ok(("h".into(), 19090)));
    assert_eq!(parse("hbase+thrift://h"), Ok(("h".into(), DEFAULT_PORT)));
    let with_master = parse_target(&Target::parse("hbase+thrift://h?master_info=m:16010").unwrap());
    assert!(with_master.unwrap().master_info.is_some());
    for bad in [
        "hbase+thrift://u:p@h:1",
        "hbase+thrift://h:1/test",
        "hbase+thrift://h:1?table=t",
        "hbase+thrift://h:1?master_info=m",
        "hbase+thrift://h:0",
    ] {
        let e = parse(bad).unwrap_err();
        assert!(!e.contains('\n'), "{bad}: {e}");
    }
}

/// A `TPut`'s row and the durability it asks for (`None` for the
/// table's default).
type PutRow = (Vec<u8>, Option<i32>);

/// The method, the table and the `TPut`s of a put request.
fn read_puts(request: &[u8]) -> (String, Vec<u8>, Vec<PutRow>) {
    assert_eq!(message_len(request), Ok(request.len()), "one whole message");
    let mut r = Reader::new(request);
    let (_, method, _) = r.message().unwrap();
    assert_eq!(r.field().unwrap(), Some((ty::STRING, 1)));
    let table = r.binary().unwrap().to_vec();
    let (field_ty, _) = r.field().unwrap().unwrap();
    let n = if field_ty == ty::LIST {
        r.list().unwrap().1
    } else {
        1
    };
    let mut puts = Vec::new();
    for _ in 0..n {
        let (mut row, mut durability) = (Vec::new(), None);
        while let Some((t, id)) = r.field().unwrap() {
            match id {
                1 => row = r.binary().unwrap().to_vec(),
                6 => durability = Some(r.i32().unwrap()),
                _ => r.skip(t).unwrap(),
            }
        }
        puts.push((row, durability));
    }
    let method = String::from_utf8(method.to_vec()).unwrap();
    (method, table, puts)
}

fn next_request() -> NextRequest {
    NextRequest {
        buf: Vec::new(),
        seq: 0,
    }
}

#[test]
fn one_queued_put_is_a_put_and_several_a_put_multiple_from_the_same_buffer() {
    let (mut q, mut next) = (PutQueue::default(), next_request());
    let cells = [Cell {
        qualifier: b"0",
        value: b"v",
    }];
    assert!(q.request(&mut next).is_none());
    q.push("t", b"r1", "info", &cells, Durability::SkipWal);
    let (request, rows) = q.request(&mut next).unwrap();
    assert_eq!(rows, 1);
    let (method, table, puts) = read_puts(request);
    assert_eq!((method.as_str(), table.as_slice()), ("put", &b"t"[..]));
    assert_eq!(puts, vec![(b"r1".to_vec(), Some(1))], "SKIP_WAL is 1");

    let queue_three = |q: &mut PutQueue| {
        for (row, durability) in [(b"a", Durability::Wal), (b"b", Durability::SkipWal)] {
            q.push("table2", row, "info", &cells, durability);
        }
        q.push("table2", b"c", "info", &cells, Durability::Wal);
    };
    queue_three(&mut q);
    let (request, rows) = q.request(&mut next).unwrap();
    assert_eq!(rows, 3);
    let (method, table, puts) = read_puts(request);
    assert_eq!(
        (method.as_str(), table.as_slice()),
        ("putMultiple", &b"table2"[..])
    );
    let expected = vec![
        (b"a".to_vec(), None),
        (b"b".to_vec(), Some(1)),
        (b"c".to_vec(), None),
    ];
    assert_eq!(puts, expected);
    assert!(q.request(&mut next).is_none(), "the queue is empty again");
    let capacity = (q.buf.capacity(), next.buf.capacity());
    queue_three(&mut q);
    assert_eq!(read_puts(q.request(&mut next).unwrap().0).2, expected);
    let reused = (q.buf.capacity(), next.buf.capacity());
    assert_eq!(reused, capacity, "no allocation the second time");
}

/// A reply to `method` whose result struct is written by `result`.
fn reply(method: &str, result: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = Writer(&mut buf);
    w.i32((0x8001_0000u32 | u32::from(REPLY)) as i32);
    w.binary(method.as_bytes());
    w.i32(1);
    result(&mut w);
    w.stop();
    buf
}

#[test]
fn a_gateway_exception_is_one_line_and_retryable_only_when_it_says_so() {
    let io_error = |can_retry: bool| {
        reply("put", |w| {
            w.field(ty::STRUCT, 1);
            w.binary_field(
                1,
                b"org.apache.hadoop.hbase.TableNotFoundException: t\n\tat x.y(Z.java:1)",
            );
            w.bool_field(2, can_retry);
            w.stop();
        })
    };
    let e = calls::outcome(&io_error(false), "h:1").unwrap_err();
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(
        e.message,
        "HBase: org.apache.hadoop.hbase.TableNotFoundException: t"
    );
    let e = calls::outcome(&io_error(true), "h:1").unwrap_err();
    assert_eq!(e.class, ErrorClass::Retryable);

    let mut unknown = Vec::new();
    let mut w = Writer(&mut unknown);
    w.i32((0x8001_0000u32 | u32::from(thrift::EXCEPTION)) as i32);
    w.binary(b"nope");
    w.i32(1);
    w.binary_field(1, b"Invalid method name: 'nope'");
    w.i32_field(2, 1);
    w.stop();
    let e = calls::outcome(&unknown, "h:1").unwrap_err();
    assert_eq!(
        e.message,
        "the HBase Thrift2 gateway at h:1 refused `nope`: Invalid method name: 'nope'"
    );
    assert!(calls::outcome(&reply("put", |_| {}), "h:1")
        .unwrap()
        .is_none());
}

#[test]
fn a_result_hands_out_cells_borrowed_from_the_reply() {
    let bytes = reply("get", |w| {
        w.field(ty::STRUCT, 0);
        w.binary_field(1, b"row1");
        w.field(ty::LIST, 2);
        w.list(ty::STRUCT, 2);
        for (q, v) in [(&b"0"[..], &b"first"[..]), (b"1", b"second")] {
            w.binary_field(1, b"info");
            w.binary_field(2, q);
            w.binary_field(3, v);
            w.field(ty::I64, 4);
            w.0.extend_from_slice(&7i64.to_be_bytes());
            w.stop();
        }
        w.stop();
    });
    let (t, mut r) = calls::value(&bytes, "h:1").unwrap();
    assert_eq!(t, ty::STRUCT);
    let mut cells = Vec::new();
    let (row, n) = calls::tresult(&mut r, &mut |c| cells.push(c)).unwrap();
    assert_eq!((row, n), (Some(&b"row1"[..]), 2));
    assert_eq!(cells[1].value, b"second");
    let range = bytes.as_ptr_range();
    assert!(
        range.contains(&cells[1].value.as_ptr()),
        "borrowed, not copied"
    );
}

#[test]
fn the_block_cache_change_keeps_every_other_setting_of_the_family() {
    let mut descriptor = Vec::new();
    let mut w = Writer(&mut descriptor);
    w.binary_field(1, b"info");
    w.i32_field(10, 3);
    w.bool_field(14, false);
    w.bool_field(20, true);
    w.stop();
    assert_eq!(calls::block_cache_on(&descriptor), Ok(false));
    assert_eq!(
        calls::block_cache_on(&[ty::STOP]),
        Ok(true),
        "HBase's default"
    );

    let mut request = Vec::new();
    calls::modify_block_cache(&mut Writer(&mut request), 1, "t", &descriptor, true).unwrap();
    assert_eq!(message_len(&request), Ok(request.len()));
    let mut r = Reader::new(&request);
    r.message().unwrap();
    assert_eq!(r.field().unwrap(), Some((ty::STRUCT, 1)));
    r.skip(ty::STRUCT).unwrap();
    assert_eq!(r.field().unwrap(), Some((ty::STRUCT, 2)));
    let mut fields = Vec::new();
    while let Some((t, id)) = r.field().unwrap() {
        fields.push(id);
        match id {
            14 => assert!(r.bool().unwrap(), "on now"),
            _ => r.skip(t).unwrap(),
        }
    }
    assert_eq!(fields, vec![1, 10, 20, 14]);
}
