//! Damaged tables: every flipped byte and every truncation is either
//! reported (corruption or I/O) or harmless; never a panic, never a wrong
//! answer.

use super::{Model, build, collect_all, model_get, open, options, sorted_model};
use crate::error::{CorruptionKind, Error, Result};
use crate::key::{self, Kind, internal_key};
use crate::options::Compression;
use crate::sst::footer::{FOOTER_BYTES, Footer};

fn small_model() -> Model {
    let entries = (0..60u64)
        .map(|i| {
            let uk = format!("key{:03}", i / 2).into_bytes();
            let kind = if i % 7 == 0 { Kind::Delete } else { Kind::Put };
            let v = if kind == Kind::Delete {
                Vec::new()
            } else {
                format!("value-{i}-{}", "x".repeat((i % 5) as usize * 9)).into_bytes()
            };
            (internal_key(&uk, 100 - i % 2, i, kind), v)
        })
        .collect();
    sorted_model(entries)
}

fn is_reported(e: &Error) -> bool {
    matches!(e, Error::Corruption { .. } | Error::Io { .. })
}

/// Reads everything the damaged `bytes` will give; every answer must be
/// an error or exactly the model's. Returns the first error met, if any.
fn read_damaged(bytes: Vec<u8>, model: &Model) -> Option<Error> {
    let table = match open(bytes, 1 << 16) {
        Ok(t) => t,
        Err(e) => {
            assert!(is_reported(&e), "unexpected error kind {e}");
            return Some(e);
        }
    };
    let mut first_error = None;
    let mut note = |r: Result<()>| {
        if let Err(e) = r {
            assert!(is_reported(&e), "unexpected error kind {e}");
            first_error.get_or_insert(e);
        }
    };
    let mut it = table.iter();
    match collect_all(&mut it, model.len() + 1) {
        Ok(all) => assert_eq!(&all, model, "damaged table iterated wrong entries"),
        Err(e) => note(Err(e)),
    }
    for (k, _) in model.iter().step_by(3) {
        let uk = key::user_key(k);
        match table.get(uk) {
            Ok(got) => assert_eq!(got, model_get(model, uk), "damaged table answered wrong"),
            Err(e) => note(Err(e)),
        }
    }
    for absent in [&b"key0005"[..], b"zzz", b""] {
        match table.get(absent) {
            Ok(got) => assert_eq!(got, None),
            Err(e) => note(Err(e)),
        }
    }
    first_error
}

/// Every single flipped byte of a table is detected or harmless, and a flip
/// inside a data block is caught by that block's checksum.
#[test]
fn every_flipped_byte_is_detected() {
    let model = small_model();
    for compression in [Compression::None, Compression::Lz4] {
        let (bytes, _) = build(&model, options(128, 4, compression));
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..]).unwrap();
        let data_end = footer.filter.offset as usize;
        assert!(data_end > 256, "the test wants several data blocks");
        assert!(
            read_damaged(bytes.clone(), &model).is_none(),
            "intact table reads clean"
        );
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x41;
            let err = read_damaged(bad, &model);
            let Some(err) = err else {
                panic!("flip at {i} of {} went unnoticed", bytes.len());
            };
            if i < data_end {
                match err {
                    Error::Corruption {
                        offset,
                        kind: CorruptionKind::ChecksumMismatch { .. },
                        ..
                    } => assert!(
                        offset as usize <= i,
                        "error offset {offset} after flip at {i}"
                    ),
                    other => panic!("flip at {i} in a data block gave {other}"),
                }
            }
        }
    }
}

/// A table cut at any length is refused or reads correctly.
#[test]
fn every_truncation_is_detected() {
    let model = small_model();
    let (bytes, _) = build(&model, options(128, 4, Compression::Lz4));
    for cut in 0..bytes.len() {
        let err = read_damaged(bytes[..cut].to_vec(), &model);
        assert!(
            err.is_some(),
            "table cut at {cut} of {} opened",
            bytes.len()
        );
    }
    // Garbage appended after the footer hides the footer: refused too.
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0u8; 7]);
    assert!(matches!(
        read_damaged(longer, &model),
        Some(Error::Corruption {
            kind: CorruptionKind::BadMagic(_),
            ..
        })
    ));
}

/// Errors name the file and point at the damaged block.
#[test]
fn errors_name_file_and_block() {
    let model = small_model();
    let (mut bytes, _) = build(&model, options(128, 4, Compression::None));
    let footer = Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..]).unwrap();
    bytes[footer.index.offset as usize + 2] ^= 1;
    match open(bytes, 0) {
        Err(Error::Corruption { path, offset, .. }) => {
            assert_eq!(path.to_str(), Some("test.sst"));
            assert_eq!(offset, footer.index.offset);
        }
        Err(other) => panic!("unexpected {other}"),
        Ok(_) => panic!("flipped index opened"),
    }
}

/// The (key, value) entries of a table's index block.
fn index_entries(bytes: &[u8]) -> Model {
    let footer = Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..]).unwrap();
    let file = crate::sst::test_file::MemReadable::new(bytes.to_vec());
    let raw =
        crate::sst::block_io::read_block(&file, std::path::Path::new("t"), footer.index).unwrap();
    let block = crate::sst::block::Block::new(
        raw,
        std::sync::Arc::from(std::path::Path::new("t")),
        footer.index.offset,
    )
    .unwrap();
    let mut it = crate::sst::block::BlockIter::new(std::sync::Arc::new(block));
    collect_all(&mut it, usize::MAX).unwrap()
}

/// `bytes` with its index block replaced by `entries` (each key stored
/// whole, or sharing its prefix with the previous key when `share`).
fn with_index(bytes: &[u8], entries: &Model, share: bool) -> Vec<u8> {
    use crate::coding::put_varint;
    let footer = Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..]).unwrap();
    let mut block = Vec::new();
    let mut restarts = Vec::new();
    let mut previous: &[u8] = &[];
    for (k, v) in entries {
        let shared = if share {
            previous.iter().zip(k).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        if shared == 0 {
            restarts.push(block.len() as u32);
        }
        put_varint(&mut block, shared as u64);
        put_varint(&mut block, (k.len() - shared) as u64);
        put_varint(&mut block, v.len() as u64);
        block.extend_from_slice(&k[shared..]);
        block.extend_from_slice(v);
        previous = k;
    }
    for r in &restarts {
        block.extend_from_slice(&r.to_le_bytes());
    }
    block.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    let stored = crate::sst::block_io::encode_block(block, Compression::None);
    let mut out = bytes[..footer.index.offset as usize].to_vec();
    let index = crate::sst::block_io::BlockHandle {
        offset: out.len() as u64,
        size: (stored.len() - crate::sst::block_io::BLOCK_TRAILER_BYTES) as u64,
    };
    out.extend_from_slice(&stored);
    out.extend_from_slice(
        &Footer {
            filter: footer.filter,
            index,
        }
        .encode(),
    );
    out
}

fn is_malformed_at_open(bytes: Vec<u8>) -> bool {
    matches!(
        open(bytes, 1 << 16),
        Err(Error::Corruption {
            kind: CorruptionKind::Malformed(_),
            ..
        })
    )
}

/// Point reads trust the index decoded at open, so open refuses a
/// well-checksummed index whose keys are out of order, share a prefix
/// (ours are always whole) or whose handles leave the data region; the
/// same entries rewritten as they were open and read fine.
#[test]
fn open_checks_the_index_point_reads_rely_on() {
    let model = small_model();
    let (bytes, _) = build(&model, options(128, 4, Compression::None));
    let entries = index_entries(&bytes);
    assert!(entries.len() > 3, "the test wants several data blocks");

    let rewritten = with_index(&bytes, &entries, false);
    let table = open(rewritten, 1 << 16).unwrap();
    for (k, _) in &model {
        let uk = key::user_key(k);
        assert_eq!(table.get(uk).unwrap(), model_get(&model, uk));
    }

    let mut swapped = entries.clone();
    swapped.swap(1, 2);
    assert!(is_malformed_at_open(with_index(&bytes, &swapped, false)));

    // Keys "key0..." share their first bytes, so this block has one restart.
    assert!(is_malformed_at_open(with_index(&bytes, &entries, true)));

    let mut far = entries.clone();
    let mut handle = Vec::new();
    crate::sst::block_io::BlockHandle {
        offset: bytes.len() as u64,
        size: 10,
    }
    .encode_varint(&mut handle);
    far[1].1 = handle;
    assert!(is_malformed_at_open(with_index(&bytes, &far, false)));
}
