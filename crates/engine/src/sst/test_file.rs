//! In-memory files for SSTable tests: a writable file whose bytes can be
//! taken back, and a readable file over a byte vector.

use crate::fs::{ReadableFile, WritableFile};
use std::io;
use std::sync::{Arc, Mutex};

/// A writable file that appends into a shared buffer.
pub struct MemWritable {
    data: Arc<Mutex<Vec<u8>>>,
    synced: Arc<Mutex<bool>>,
    writebacks: Arc<Mutex<Vec<u64>>>,
}

/// The other end of a [`MemWritable`]: what was written, and whether it was synced.
#[derive(Clone)]
pub struct MemWritten {
    data: Arc<Mutex<Vec<u8>>>,
    synced: Arc<Mutex<bool>>,
    writebacks: Arc<Mutex<Vec<u64>>>,
}

impl MemWritable {
    /// An empty file and a handle to read its bytes later.
    pub fn create() -> (Box<dyn WritableFile>, MemWritten) {
        let data = Arc::new(Mutex::new(Vec::new()));
        let synced = Arc::new(Mutex::new(false));
        let writebacks = Arc::new(Mutex::new(Vec::new()));
        let file = MemWritable {
            data: data.clone(),
            synced: synced.clone(),
            writebacks: writebacks.clone(),
        };
        (
            Box::new(file),
            MemWritten {
                data,
                synced,
                writebacks,
            },
        )
    }
}

impl MemWritten {
    /// A copy of the bytes written so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.data.lock().map(|d| d.clone()).unwrap_or_default()
    }
    /// True once `sync` was called.
    pub fn synced(&self) -> bool {
        self.synced.lock().map(|s| *s).unwrap_or(false)
    }
    /// The file's length at each `start_writeback`.
    pub fn writebacks(&self) -> Vec<u64> {
        self.writebacks
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default()
    }
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut buf = self.data.lock().map_err(|_| io::Error::other("poisoned"))?;
        buf.extend_from_slice(data);
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        *self
            .synced
            .lock()
            .map_err(|_| io::Error::other("poisoned"))? = true;
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.lock().map(|d| d.len() as u64).unwrap_or(0)
    }
    fn start_writeback(&mut self) {
        let len = self.len();
        if let Ok(mut w) = self.writebacks.lock() {
            w.push(len);
        }
    }
}

/// A readable file over a byte vector.
pub struct MemReadable {
    data: Vec<u8>,
}

impl MemReadable {
    /// A file holding `data`.
    pub fn new(data: Vec<u8>) -> Self {
        MemReadable { data }
    }
}

impl ReadableFile for MemReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::Error::other("offset"))?;
        let end = start
            .checked_add(buf.len())
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "short file"))?;
        buf.copy_from_slice(&self.data[start..end]);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
}
