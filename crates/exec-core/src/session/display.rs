//! Rich display: MIME bundles (Jupyter's `{"text/html": ..., "image/png":
//! <base64>, ...}`) from a cell's last value and from `display()` calls,
//! delivered as they happen to a [`DisplaySink`] and kept with the result.
//! Both drivers make the bundles; the size cap is applied here, once.

use serde_json::{Map, Value};

/// One MIME bundle: a MIME type to its data (text, base64 for binary types,
/// JSON for `application/json`).
pub type Bundle = Map<String, Value>;

/// Bytes a bundle may take (its JSON); see [`cap_bundle`].
pub const DEFAULT_MAX_DISPLAY_BYTES: usize = 8 * 1024 * 1024;

/// Where the bundles of an execution go as they come.
pub trait DisplaySink: Send + 'static {
  fn display(&mut self, bundle: &Bundle);
}

/// Drops the bundles (they are still kept with the result).
pub struct NoDisplay;

impl DisplaySink for NoDisplay {
  fn display(&mut self, _: &Bundle) {}
}

impl<F: FnMut(&Bundle) + Send + 'static> DisplaySink for F {
  fn display(&mut self, bundle: &Bundle) {
    self(bundle)
  }
}

fn size_of(v: &Value) -> usize {
  match v {
    Value::String(s) => s.len(),
    other => other.to_string().len(),
  }
}

/// A bundle over `cap` bytes loses its largest entries until it fits; each
/// one dropped is named in `text/plain`:
/// `[exec-native: image/png (12345678 bytes) omitted, over the display cap of 8388608 bytes]`.
/// A `text/plain` that is itself too long keeps its head and tail.
pub fn cap_bundle(mut b: Bundle, cap: usize) -> Bundle {
  let total: usize = b.iter().map(|(k, v)| k.len() + size_of(v)).sum();
  if total <= cap {
    return b;
  }
  let mut sizes: Vec<(String, usize)> = b
    .iter()
    .filter(|(k, _)| k.as_str() != "text/plain")
    .map(|(k, v)| (k.clone(), size_of(v)))
    .collect();
  sizes.sort_by_key(|s| std::cmp::Reverse(s.1));
  let mut left = total;
  let mut notes = Vec::new();
  for (mime, size) in sizes {
    if left <= cap {
      break;
    }
    b.remove(&mime);
    left -= size + mime.len();
    notes.push(format!(
      "[exec-native: {mime} ({size} bytes) omitted, over the display cap of {cap} bytes]"
    ));
  }
  let text = match b.remove("text/plain") {
    Some(Value::String(s)) => s,
    Some(other) => other.to_string(),
    None => String::new(),
  };
  let room = cap.saturating_sub(notes.iter().map(|n| n.len() + 1).sum::<usize>() + 16);
  let mut text = super::capture::cap_text(text, room.max(256));
  for n in notes {
    if !text.is_empty() {
      text.push('\n');
    }
    text.push_str(&n);
  }
  b.insert("text/plain".into(), Value::String(text));
  b
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_bundle_over_the_cap_loses_its_largest_entry_with_a_note() {
    let mut b = Bundle::new();
    b.insert("text/plain".into(), "<Figure>".into());
    b.insert("image/png".into(), "A".repeat(10_000).into());
    b.insert("text/html".into(), "<b>small</b>".into());
    let c = cap_bundle(b, 1000);
    assert!(!c.contains_key("image/png"));
    assert_eq!(c["text/html"], "<b>small</b>");
    let text = c["text/plain"].as_str().unwrap();
    assert!(
      text.starts_with("<Figure>\n[exec-native: image/png (10000 bytes) omitted"),
      "{text}"
    );
  }

  #[test]
  fn a_bundle_under_the_cap_is_unchanged() {
    let mut b = Bundle::new();
    b.insert("image/png".into(), "AAAA".into());
    assert_eq!(cap_bundle(b.clone(), 1000), b);
  }
}
