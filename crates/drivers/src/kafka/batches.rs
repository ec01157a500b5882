//! Record batches (Kafka's message format v2), read in place: a record's
//! value is handed over as a slice of the fetch answer it came in, so
//! nothing is copied or allocated per record. Compressed batches are
//! inflated once each, by the `kafka-protocol` crate's codecs.

use bytes::{Buf, Bytes};
use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};

/// Bytes before a batch's records: base offset (8), length (4), leader
/// epoch (4), magic (1), crc (4), attributes (2), last offset delta (4),
/// first and max timestamps (16), producer id (8) and epoch (2), base
/// sequence (4), record count (4).
const BATCH_HEADER: usize = 61;
/// Base offset and length: what a batch's length does not count.
const LOG_OVERHEAD: usize = 12;
const CONTROL: i16 = 0x20;
const COMPRESSION: i16 = 0x07;

/// One batch's header fields that the consumer uses.
struct BatchHeader {
    base_offset: i64,
    /// The offset after the batch's last.
    end_offset: i64,
    attributes: i16,
    count: i32,
    /// Bytes the batch takes, header included.
    size: usize,
}

fn header(data: &[u8]) -> Result<Option<BatchHeader>, String> {
    if data.len() < LOG_OVERHEAD {
        return Ok(None);
    }
    let mut b = data;
    let base_offset = b.get_i64();
    let length = b.get_i32();
    let size = LOG_OVERHEAD + length.max(0) as usize;
    // The broker cuts the last batch short at the size limit.
    if data.len() < size || size < BATCH_HEADER {
        return Ok(None);
    }
    let _leader_epoch = b.get_i32();
    let magic = b.get_i8();
    if magic != 2 {
        return Err(format!(
            "records in message format v{magic}, which loadcell's consumer does not read \
             (format v2 has been Kafka's since 0.11)"
        ));
    }
    let _crc = b.get_u32();
    let attributes = b.get_i16();
    let last_offset_delta = b.get_i32();
    b.advance(16 + 8 + 2 + 4);
    let count = b.get_i32();
    Ok(Some(BatchHeader {
        base_offset,
        end_offset: base_offset + i64::from(last_offset_delta) + 1,
        attributes,
        count,
        size,
    }))
}

/// The offset after the last whole batch of `records`, if any is whole:
/// where the next fetch of the partition starts.
pub(super) fn end_offset(mut records: &[u8]) -> Result<Option<i64>, String> {
    let mut end = None;
    while let Some(batch) = header(records)? {
        end = Some(batch.end_offset);
        records = &records[batch.size..];
    }
    Ok(end)
}

/// The records of one partition's fetch answer still to hand over.
pub(super) struct Records {
    /// Whole batches not yet started.
    rest: Bytes,
    /// The batch being handed over: its records, inflated if they were
    /// compressed.
    batch: Bytes,
    /// Where the batch's next record starts.
    at: usize,
    batch_base: i64,
    batch_end: i64,
    batch_left: i32,
}

/// What [`Records::next`] found.
pub(super) enum Next<'a> {
    /// A record at `offset`, with its value.
    Record { offset: i64, value: &'a [u8] },
    /// No more records; the partition's next offset is at least this.
    End(i64),
}

impl Records {
    pub(super) fn new(records: Bytes) -> Records {
        Records {
            rest: records,
            batch: Bytes::new(),
            at: 0,
            batch_base: 0,
            batch_end: 0,
            batch_left: 0,
        }
    }

    /// The next record at or after `from`.
    pub(super) fn next(&mut self, from: i64) -> Result<Next<'_>, String> {
        loop {
            while self.batch_left > 0 {
                self.batch_left -= 1;
                let (offset_delta, value) = record(&self.batch, &mut self.at)?;
                let offset = self.batch_base + offset_delta;
                if offset >= from {
                    return Ok(Next::Record {
                        offset,
                        value: &self.batch[value],
                    });
                }
            }
            // A batch's end counts offsets its records lack (compaction,
            // control records).
            let done = self.batch_end;
            let Some(batch) = header(&self.rest)? else {
                return Ok(Next::End(done.max(from)));
            };
            let mut whole = self.rest.split_to(batch.size);
            whole.advance(BATCH_HEADER);
            self.batch_base = batch.base_offset;
            self.batch_end = batch.end_offset;
            if batch.attributes & CONTROL != 0 || batch.end_offset <= from {
                self.batch_left = 0;
                self.batch = Bytes::new();
                continue;
            }
            self.batch = inflate(batch.attributes & COMPRESSION, whole)?;
            self.at = 0;
            self.batch_left = batch.count;
        }
    }
}

fn inflate(codec: i16, mut records: Bytes) -> Result<Bytes, String> {
    let whole = |b: &mut Bytes| Ok(b.copy_to_bytes(b.remaining()));
    match codec {
        0 => Ok(records),
        1 => Gzip::decompress(&mut records, whole),
        2 => Snappy::decompress(&mut records, whole),
        3 => Lz4::decompress(&mut records, whole),
        4 => Zstd::decompress(&mut records, whole),
        other => return Err(format!("records compressed with unknown codec {other}")),
    }
    .map_err(|e| format!("could not inflate a record batch: {e:#}"))
}

/// Reads the record at `at` in `batch`: its offset delta and where its
/// value lies; moves `at` past the record.
fn record(batch: &[u8], at: &mut usize) -> Result<(i64, std::ops::Range<usize>), String> {
    let short = || "a record batch cut short".to_string();
    let length = varint(batch, at).ok_or_else(short)?;
    let end = *at + usize::try_from(length).map_err(|_| short())?;
    if end > batch.len() {
        return Err(short());
    }
    let mut field = *at + 1; // past the attributes
    varint(batch, &mut field).ok_or_else(short)?; // timestamp delta
    let offset_delta = varint(batch, &mut field).ok_or_else(short)?;
    let key = varint(batch, &mut field).ok_or_else(short)?;
    field += key.max(0) as usize;
    let value = varint(batch, &mut field).ok_or_else(short)?;
    let value = field..field + value.max(0) as usize;
    if value.end > end {
        return Err(short());
    }
    *at = end;
    Ok((offset_delta, value))
}

/// A zigzag varint (a varlong's first 64 bits), at `at`.
fn varint(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn record(offset: i64, value: &str, control: bool) -> Record {
        Record {
            transactional: control,
            control,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            // The crate's encoder batches records whose offset less
            // sequence agree.
            sequence: offset as i32,
            timestamp: 0,
            key: Some(Bytes::from_static(b"key")),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: Default::default(),
        }
    }

    /// One batch per run of offsets, encoded by the crate.
    fn batches(runs: &[(&[i64], Compression, bool)]) -> Bytes {
        let mut out = BytesMut::new();
        for &(offsets, compression, control) in runs {
            let records: Vec<Record> = offsets
                .iter()
                .map(|&o| record(o, &format!("row {o}"), control))
                .collect();
            let options = RecordEncodeOptions {
                version: 2,
                compression,
            };
            RecordBatchEncoder::encode(&mut out, &records, &options).unwrap();
        }
        out.freeze()
    }

    /// Every record from `from` on, and where the partition goes next.
    fn read(data: Bytes, mut from: i64) -> (Vec<(i64, String)>, i64) {
        let mut records = Records::new(data);
        let mut seen = Vec::new();
        loop {
            match records.next(from).unwrap() {
                Next::Record { offset, value } => {
                    seen.push((offset, String::from_utf8(value.to_vec()).unwrap()));
                    from = offset + 1;
                }
                Next::End(next) => return (seen, next),
            }
        }
    }

    #[test]
    fn records_come_out_in_place_from_the_offset_asked_for() {
        let data = batches(&[
            (&[10, 11, 12], Compression::None, false),
            (&[13, 14], Compression::None, false),
        ]);
        let (seen, next) = read(data.clone(), 11);
        let offsets: Vec<i64> = seen.iter().map(|s| s.0).collect();
        assert_eq!(offsets, [11, 12, 13, 14]);
        assert_eq!(seen[0].1, "row 11");
        assert_eq!(next, 15);
        assert_eq!(end_offset(&data).unwrap(), Some(15));
    }

    #[test]
    fn compressed_batches_are_inflated_and_read_alike() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let data = batches(&[
                (&[0, 1, 2, 3], codec, false),
                (&[4], Compression::None, false),
            ]);
            let (seen, next) = read(data, 0);
            let values: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
            assert_eq!(
                values,
                ["row 0", "row 1", "row 2", "row 3", "row 4"],
                "{codec:?}"
            );
            assert_eq!(next, 5);
        }
    }

    #[test]
    fn a_batch_cut_short_by_the_size_limit_is_left_for_the_next_fetch() {
        let data = batches(&[
            (&[0, 1], Compression::None, false),
            (&[2, 3], Compression::None, false),
        ]);
        let cut = data.slice(..data.len() - 5);
        assert_eq!(end_offset(&data).unwrap(), Some(4));
        let (seen, next) = read(cut.clone(), 0);
        assert_eq!(seen.len(), 2);
        assert_eq!(next, 2);
        assert_eq!(end_offset(&cut).unwrap(), Some(2));
        assert_eq!(end_offset(&data[..20]).unwrap(), None);
    }

    #[test]
    fn control_records_are_passed_over_but_their_offsets_count() {
        let data = batches(&[
            (&[0], Compression::None, false),
            (&[1], Compression::None, true),
            (&[2], Compression::None, false),
        ]);
        let (seen, next) = read(data, 0);
        let offsets: Vec<i64> = seen.iter().map(|s| s.0).collect();
        assert_eq!(offsets, [0, 2]);
        assert_eq!(next, 3);
    }

    #[test]
    fn an_old_message_format_is_refused_by_name() {
        let mut data = batches(&[(&[0], Compression::None, false)]).to_vec();
        data[16] = 1;
        let e = Records::new(Bytes::from(data)).next(0).err().unwrap();
        assert!(e.contains("message format v1"), "{e}");
    }
}
