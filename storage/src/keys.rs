//! Byte layouts of the keys in each column family.
//!
//! History keys are `user_key ++ 0x00 ++ revision(8 bytes, big endian)`: user keys never contain
//! NUL, so all versions of one key sort together, oldest first, and keys keep their byte order.

use crate::StorageError;

/// Encodes a revision or log index so that byte order is numeric order.
pub fn be(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

/// Decodes [`be`]; `None` if the slice is not 8 bytes.
pub fn from_be(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.try_into().ok()?))
}

/// Key of one historical version of `key` at `rev`.
pub fn history_key(key: &[u8], rev: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 9);
    k.extend_from_slice(key);
    k.push(0);
    k.extend_from_slice(&be(rev as u64));
    k
}

/// Splits a history key into user key and revision.
pub fn split_history_key(k: &[u8]) -> Result<(&[u8], i64), StorageError> {
    if k.len() < 9 || k[k.len() - 9] != 0 {
        return Err(StorageError::corrupt("history key", "bad layout"));
    }
    let (key, rest) = k.split_at(k.len() - 9);
    let rev = from_be(&rest[1..]).ok_or_else(|| StorageError::corrupt("history key", "bad revision"))?;
    Ok((key, rev as i64))
}

/// The smallest key strictly greater than every key starting with `prefix`
/// (`None` when no such key exists, i.e. the prefix is all 0xff or empty).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest valid user key strictly greater than `key`. User keys never contain NUL, so
/// that is `key ++ 0x01`; it is also greater than every history key of `key` (`key ++ 0x00 ++ …`),
/// which makes it a correct exclusive bound in both the `kv` and `history` families.
pub fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(1);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keys_round_trip_and_sort_by_key_then_revision() {
        let a1 = history_key(b"a", 1);
        let a2 = history_key(b"a", 300);
        let ab = history_key(b"ab", 0);
        assert!(a1 < a2 && a2 < ab);
        assert_eq!(split_history_key(&a2).unwrap(), (&b"a"[..], 300));
        assert!(split_history_key(b"short").is_err());
    }

    #[test]
    fn prefix_end_skips_trailing_ff() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn successor_bounds_every_version_of_the_key() {
        let next = successor(b"k");
        assert!(history_key(b"k", i64::MAX) < history_key(&next, 0));
        assert!(b"k".to_vec() < next && next < b"k\x02".to_vec());
    }
}
