//! A writer that hashes what passes through it: snapshot and backup files end with the
//! SHA-256 of everything before it.

use std::io::Write;

use sha2::{Digest, Sha256};

/// Writes to `inner`, hashing and counting every byte written.
pub(crate) struct HashingWriter<W: Write> {
    pub(crate) inner: W,
    pub(crate) hash: Sha256,
    pub(crate) written: u64,
}

impl<W: Write> HashingWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hash: Sha256::new(),
            written: 0,
        }
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
