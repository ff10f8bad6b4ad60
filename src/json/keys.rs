//! Keys written twice in one object: serde_json keeps the last of them without a word, so the
//! text is looked at again when it holds more keys than the value read from it.

use serde_json::Value;

/// The first key that appears twice in one object of `bytes` (valid JSON, parsed as `value`):
/// its offset and text. Cheap when there is none, the common case: the keys in the text (one
/// `:` outside strings each) are counted against the keys `value` holds, and only when they
/// differ is the text walked object by object.
pub(crate) fn duplicate_key(bytes: &[u8], value: &Value) -> Option<Duplicate> {
    fn keys_held(value: &Value) -> usize {
        match value {
            Value::Object(map) => map.len() + map.values().map(keys_held).sum::<usize>(),
            Value::Array(items) => items.iter().map(keys_held).sum(),
            _ => 0,
        }
    }
    if keys_written(bytes) == keys_held(value) {
        return None;
    }
    first_key_twice(bytes)
}

/// The keys written in `bytes` (valid JSON): its colons outside strings. Only quotes,
/// backslashes and colons matter, found with memchr's vectorised search.
fn keys_written(bytes: &[u8]) -> usize {
    let mut colons = 0;
    let mut in_string = false;
    let mut escaped_at = usize::MAX;
    for at in memchr::memchr3_iter(b'"', b'\\', b':', bytes) {
        if in_string {
            if at == escaped_at {
                continue;
            }
            match bytes[at] {
                b'\\' => escaped_at = at + 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if bytes[at] == b'"' {
            in_string = true;
        } else if bytes[at] == b':' {
            colons += 1;
        }
    }
    colons
}

/// An object or array the walk of [`first_key_twice`] is inside.
enum Open {
    /// An object: the keys seen so far, and the last (the member being read).
    Object { keys: std::collections::HashSet<String>, current: String },
    /// An array: the position of the item being read.
    Array { index: usize },
}

/// The slow walk: the keys of each open object (a key being a string followed by `:`) and the
/// place of each open array, for the JSON path of the object the key is in.
pub(crate) fn first_key_twice(bytes: &[u8]) -> Option<Duplicate> {
    let mut open: Vec<Open> = Vec::new();
    let mut last_string: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                last_string = Some((start, i + 1));
            }
            b'{' => open.push(Open::Object { keys: Default::default(), current: String::new() }),
            b'[' => open.push(Open::Array { index: 0 }),
            b'}' | b']' => {
                open.pop();
            }
            b',' => {
                if let Some(Open::Array { index }) = open.last_mut() {
                    *index += 1;
                }
            }
            b':' => {
                let Some((start, end)) = last_string else { continue };
                let key: String = serde_json::from_slice(&bytes[start..end]).unwrap_or_default();
                let Some(Open::Object { keys, current }) = open.last_mut() else { continue };
                if !keys.insert(key.clone()) {
                    return Some(Duplicate { offset: start, key, object: json_path(&open[..open.len() - 1]) });
                }
                *current = key;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The JSON path (`$.a[2].b`) of the value read in `open`, the objects and arrays around it
/// (outermost first).
fn json_path(open: &[Open]) -> String {
    let mut path = String::from("$");
    for frame in open {
        match frame {
            Open::Object { current, .. } => path.push_str(&format!(".{current}")),
            Open::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

/// A key found twice in one object: where the second one is, the key, and the JSON path of
/// the object.
pub(crate) struct Duplicate {
    pub(crate) offset: usize,
    pub(crate) key: String,
    pub(crate) object: String,
}
