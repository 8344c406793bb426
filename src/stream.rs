//! Streaming output to JavaScript callbacks: decoded on UTF-8 boundaries, cut
//! into chunks of at most [`CHUNK`] bytes, coalesced, in order, and with
//! backpressure on the pipe when JavaScript falls behind, so memory stays
//! bounded and nothing is lost.
//!
//! The rule: chunks go to JavaScript in batches of at most [`WINDOW`], the
//! next batch once JavaScript has returned from every call of the previous
//! one. A batch holds the full chunks (64 KiB each) read meanwhile; a partial
//! chunk joins it only when `interval` has passed since the last batch (the
//! first goes at once). So a trickle of output gets at most one call per
//! interval, and a flood gets 64 KiB per call, up to 4 calls (256 KiB) per
//! turn of the event loop: the calls of a batch are calls of one threadsafe
//! function, which Node runs back to back in one wake-up; after the last one
//! the loop gets a turn (setImmediate), and then the JS thread itself hands
//! over the next batch, already read and converted by the pump meanwhile.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exec_core::process::supervise::OutputSink;
use exec_core::utf8::incomplete_suffix_len;
use exec_core::CancellationToken;
use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::text::{JsBytes, JsText};

/// A callback taking one string, weak (does not keep Node alive by itself: the
/// pending promise does), errors not passed as a first argument.
pub type StringCallback =
  ThreadsafeFunction<JsText, Unknown<'static>, JsText, Status, false, true, 0>;

/// The same, taking one Buffer (`encoding: 'buffer'`).
pub type BufferCallback =
  ThreadsafeFunction<JsBytes, Unknown<'static>, JsBytes, Status, false, true, 0>;

/// An output callback: strings decoded on UTF-8 boundaries, or raw Buffers.
pub enum Callback {
  Text(StringCallback),
  Bytes(BufferCallback),
}

/// Most bytes (UTF-8 input) in one call: what Node's own pipe reads give a
/// `'data'` listener, and a string V8 allocates in its young generation.
pub const CHUNK: usize = 64 * 1024;
/// Chunks handed to the JS thread in one batch (one turn of the event loop),
/// at most: 256 KiB. 8 gave 3% more throughput and a loop p99 over Node's in
/// some runs (docs/PERFORMANCE.md, streaming item 7).
const WINDOW: usize = 4;
/// A text stream's pump stops reading while this many chunks (512 KiB) wait
/// to be handed over: two batches.
const TEXT_AHEAD: usize = 2 * WINDOW;
/// A Buffer stream's pump reads ahead until this many chunks (1 MiB) wait
/// to be handed over, then stops (backpressure: the child blocks on the full
/// pipe) ...
const AHEAD: usize = 4 * WINDOW;
/// ... and reads on once JavaScript has taken them down to 512 KiB: when
/// the JS thread ends a batch the next is staged already (it does not sleep
/// until the pump wakes up and reads), and the pump reads two batches per
/// wake-up. Further ahead ran faster still, but the loop p99 rose past
/// Node's (the same collections in less time): docs/PERFORMANCE.md, item 6.
const RESUME: usize = 2 * WINDOW;

thread_local! {
  /// Streams whose next batch waits for a turn of this thread's event loop.
  static WAITING: RefCell<HashMap<u32, Arc<Shared>>> = RefCell::new(HashMap::new());
  /// `execStreamTurn` of this thread's environment (a reference).
  static TURN: Cell<sys::napi_ref> = const { Cell::new(ptr::null_mut()) };
}
static NEXT_WAIT: AtomicU32 = AtomicU32::new(0);
/// `setImmediate(fn, id)`.
type SetImmediate<'a> = Function<'a, FnArgs<(Function<'a, u32, ()>, u32)>, Unknown<'a>>;

/// Once per environment: the function `setImmediate` calls between batches.
pub fn init_env(env: &Env) -> Result<()> {
  let turn = env.create_function_from_closure::<u32, (), _>("execStreamTurn", |ctx| {
    let id: u32 = ctx.get(0)?;
    if let Some(stream) = WAITING.with(|w| w.borrow_mut().remove(&id)) {
      stream.next_turn();
    }
    Ok(())
  })?;
  let mut r = ptr::null_mut();
  // SAFETY: `env` is the live env of this call on the JS thread, `turn` a function handle of this
  // scope, and `r` a live out-pointer; the reference (count 1) keeps the function alive past the
  // scope.
  check_status!(unsafe { sys::napi_create_reference(env.raw(), turn.raw(), 1, &mut r) })?;
  TURN.with(|t| t.set(r));
  // teardown: the streams still waiting are let go on this thread, as the
  // functions' finalizers let them go before
  env.add_env_cleanup_hook((), |()| {
    TURN.with(|t| t.set(ptr::null_mut()));
    let waiting = WAITING.with(|w| std::mem::take(&mut *w.borrow_mut()));
    drop(waiting);
  })?;
  Ok(())
}

/// What the pump and the JS thread share for one stream.
struct Shared {
  cb: Callback,
  staged: Mutex<Staged>,
  /// Calls of the batch in flight that JavaScript has not returned from.
  queued: AtomicUsize,
  /// A batch is in flight (until a turn of the event loop after its last
  /// call). Changed only with `staged` locked.
  busy: AtomicBool,
  /// The JS thread took a batch or let the last one go.
  changed: Notify,
}

/// Chunks read, converted for JavaScript, not yet handed over.
#[derive(Default)]
struct Staged {
  chunks: VecDeque<(Ready, usize)>,
  /// Their length in bytes (as read).
  bytes: usize,
  last_sent: Option<Instant>,
}

impl Shared {
  fn lock(&self) -> std::sync::MutexGuard<'_, Staged> {
    self.staged.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Hand over a batch of up to [`WINDOW`] staged chunks unless one is in
  /// flight (from the pump's thread, or from the JS thread after a turn).
  fn send_batch(self: &Arc<Self>, st: &mut Staged) {
    let n = st.chunks.len().min(WINDOW);
    if n == 0 || self.busy.load(Ordering::Acquire) {
      return;
    }
    // counted before the first call: the batch ends with its last call
    self.busy.store(true, Ordering::Release);
    self.queued.fetch_add(n, Ordering::AcqRel);
    for (chunk, len) in st.chunks.drain(..n) {
      st.bytes -= len;
      self.call(chunk);
    }
    st.last_sent = Some(Instant::now());
  }

  fn call(self: &Arc<Self>, chunk: Ready) {
    let me = self.clone();
    let settled = move |_ret: Result<Unknown<'static>>, env: Env| {
      // a callback that threw lands here as Err: the run goes on
      me.done(Some(&env));
      Ok(())
    };
    let status = match (&self.cb, chunk) {
      (Callback::Text(cb), Ready::Text(text)) => {
        cb.call_with_return_value(text, ThreadsafeFunctionCallMode::NonBlocking, settled)
      }
      (Callback::Bytes(cb), Ready::Bytes(bytes)) => cb.call_with_return_value(
        JsBytes(bytes),
        ThreadsafeFunctionCallMode::NonBlocking,
        settled,
      ),
      _ => unreachable!("a sink fills chunks of its callback's kind"),
    };
    if status != Status::Ok {
      // the environment is closing: nobody is listening any more
      self.done(None);
    }
  }

  /// JavaScript returned from one call (on the JS thread; `env` is None when
  /// the call could not be made).
  fn done(self: &Arc<Self>, env: Option<&Env>) {
    if self.queued.fetch_sub(1, Ordering::AcqRel) != 1 {
      return;
    }
    // The last call of the batch. Node runs the queued calls of a threadsafe
    // function back to back, and keeps going (up to 1000 calls) when more
    // were queued meanwhile: handing over the next batch right away let one
    // turn of the loop run hundreds of calls. The next batch goes
    // after a turn of the event loop instead (setImmediate runs after the I/O
    // callbacks of this turn), from this thread: it is staged already, so
    // JavaScript does not wait for the pump to wake up.
    let deferred = env.map(|env| self.after_a_turn(env));
    if !matches!(deferred, Some(Ok(()))) {
      // (not locked: a failed call is seen inside `send_batch`, which holds the lock)
      self.busy.store(false, Ordering::Release);
      self.changed.notify_waiters();
    }
  }

  /// `setImmediate(execStreamTurn, id)`: the function is made once per
  /// environment (one made per batch, with this stream in its closure, was
  /// garbage that survived scavenges, 2000 per GiB: docs/PERFORMANCE.md,
  /// streaming item 7); the stream waits in `WAITING` under `id`.
  fn after_a_turn(self: &Arc<Self>, env: &Env) -> Result<()> {
    let r = TURN.with(|t| t.get());
    if r.is_null() {
      return Err(Error::from_reason(
        "exec: the stream's turn function is gone (EIO)",
      ));
    }
    let mut f = ptr::null_mut();
    // SAFETY: `env` is the live env on the JS thread; `r` is the reference made in `init_env`
    // (checked non-null above: the cleanup hook has not run) and `f` a live out-pointer.
    check_status!(unsafe { sys::napi_get_reference_value(env.raw(), r, &mut f) })?;
    // SAFETY: the reference holds the function made in `init_env`
    let turn: Function<u32, ()> = unsafe { Function::from_napi_value(env.raw(), f)? };
    let id = NEXT_WAIT.fetch_add(1, Ordering::Relaxed);
    WAITING.with(|w| w.borrow_mut().insert(id, self.clone()));
    let set_immediate: SetImmediate = env.get_global()?.get_named_property("setImmediate")?;
    set_immediate
      .call(FnArgs::from((turn, id)))
      .map(drop)
      .inspect_err(|_| {
        WAITING.with(|w| w.borrow_mut().remove(&id));
      })
  }

  /// A turn of the event loop after a batch: the next one goes.
  fn next_turn(self: &Arc<Self>) {
    let mut st = self.lock();
    self.busy.store(false, Ordering::Release);
    self.send_batch(&mut st);
    drop(st);
    // the pump may read again (or finish)
    self.changed.notify_waiters();
  }

  /// Until `ok` holds (checked with the staging locked).
  async fn wait_until(&self, ok: impl Fn(&Staged, bool) -> bool) {
    loop {
      let w = self.changed.notified();
      tokio::pin!(w);
      w.as_mut().enable();
      {
        let st = self.lock();
        if ok(&st, self.busy.load(Ordering::Acquire)) {
          return;
        }
      }
      w.await;
    }
  }
}

/// A text chunk being filled in place: the pump reads into its spare room
/// and the new bytes are checked as UTF-8 where they lie. ASCII (the common
/// case) costs one pass and no copy before V8's; before, every byte was read
/// into the pump's buffer, validated, copied into the chunk and scanned for
/// ASCII again (docs/PERFORMANCE.md, streaming item 7).
///
/// `buf[..valid]` is checked UTF-8 of whole characters; the bytes after it
/// (at most 3) start a character that the next read completes. Invalid
/// bytes become U+FFFD, as `String::from_utf8_lossy` makes them.
struct OpenText {
  buf: Vec<u8>,
  valid: usize,
  /// Every checked byte is ASCII (a hint: when false the chunk is scanned
  /// again on its way out).
  ascii: bool,
}

impl OpenText {
  fn new() -> Self {
    OpenText {
      buf: Vec::new(),
      valid: 0,
      ascii: true,
    }
  }

  fn len(&self) -> usize {
    self.buf.len()
  }

  /// The room left in the chunk, for a read.
  fn room(&mut self) -> &mut [MaybeUninit<u8>] {
    if self.buf.capacity() == 0 {
      self.buf = crate::text::chunk_buffer(CHUNK);
    }
    let left = CHUNK.saturating_sub(self.buf.len());
    if self.buf.capacity() - self.buf.len() < left {
      self.buf.reserve(left);
    }
    &mut self.buf.spare_capacity_mut()[..left]
  }

  /// `n` bytes were written at the start of `room()`.
  fn filled(&mut self, n: usize) {
    assert!(
      n <= CHUNK.saturating_sub(self.buf.len()) && n <= self.buf.capacity() - self.buf.len(),
      "a read fills at most the room lent"
    );
    // SAFETY: the first `n` bytes of the spare capacity were written
    unsafe { self.buf.set_len(self.buf.len() + n) };
    self.check();
  }

  /// Check what came after `valid`.
  fn check(&mut self) {
    let new = &self.buf[self.valid..];
    if new.is_ascii() {
      self.valid = self.buf.len();
      return;
    }
    self.ascii = false;
    let end = self.buf.len() - incomplete_suffix_len(new);
    if std::str::from_utf8(&self.buf[self.valid..end]).is_ok() {
      self.valid = end;
      return;
    }
    // invalid bytes: the checked part is rewritten with U+FFFD (rare: a
    // stream that is not UTF-8; one pass, not a shift per bad byte)
    let region = self.buf.split_off(self.valid);
    let end = region.len() - incomplete_suffix_len(&region);
    for part in region[..end].utf8_chunks() {
      self.buf.extend_from_slice(part.valid().as_bytes());
      if !part.invalid().is_empty() {
        self.buf.extend_from_slice("\u{FFFD}".as_bytes());
      }
    }
    self.valid = self.buf.len();
    self.buf.extend_from_slice(&region[end..]);
  }

  /// Nothing more fits: the checked part goes, and a character cut at the
  /// end of the chunk starts the next one.
  fn is_full(&self) -> bool {
    self.buf.len() >= CHUNK
  }

  /// The checked text, at most [`CHUNK`] bytes cut on a character boundary;
  /// what follows starts the next chunk. None if nothing is checked.
  fn take(&mut self) -> Option<CheckedText> {
    if self.valid == 0 {
      return None;
    }
    let mut cut = self.valid.min(CHUNK);
    while cut < self.valid && self.buf[cut] & 0xC0 == 0x80 {
      cut -= 1;
    }
    let mut next = crate::text::chunk_buffer(CHUNK);
    next.extend_from_slice(&self.buf[cut..]);
    let mut chunk = std::mem::replace(&mut self.buf, next);
    chunk.truncate(cut);
    let ascii = self.ascii;
    self.valid -= cut;
    self.ascii = self.buf[..self.valid].is_ascii();
    Some(CheckedText {
      bytes: chunk,
      ascii,
    })
  }

  /// The end of the stream: a character left incomplete becomes U+FFFD.
  fn finish(&mut self) {
    if self.valid < self.buf.len() {
      let rest = self.buf.split_off(self.valid);
      self
        .buf
        .extend_from_slice(String::from_utf8_lossy(&rest).as_bytes());
      self.valid = self.buf.len();
      self.ascii = false;
    }
  }
}

/// A chunk of text, UTF-8 by construction.
struct CheckedText {
  bytes: Vec<u8>,
  ascii: bool,
}

impl CheckedText {
  fn len(&self) -> usize {
    self.bytes.len()
  }

  fn into_js(self) -> JsText {
    if self.ascii {
      JsText::Latin1(self.bytes)
    } else {
      // SAFETY: `OpenText` hands out checked UTF-8 cut on character boundaries
      JsText::new(unsafe { String::from_utf8_unchecked(self.bytes) })
    }
  }
}

/// A chunk ready to go.
enum Ready {
  Text(JsText),
  Bytes(Vec<u8>),
}

pub struct CallbackSink {
  /// None: no callback, or its environment is gone (then output is dropped).
  shared: Option<Arc<Shared>>,
  /// The callback's environment was torn down (see `host::teardown`): its
  /// batch in flight will never end, so the waits below give up then.
  gone: CancellationToken,
  /// The chunk being filled (text callbacks): read into in place, checked as
  /// UTF-8 where it lies.
  open: OpenText,
  /// The chunk being filled (Buffer callbacks).
  open_bytes: Vec<u8>,
  interval: Duration,
  text: bool,
}

impl CallbackSink {
  /// Made on the JS thread of the callback's environment.
  pub fn new(callback: Option<Callback>, interval: Duration) -> Self {
    CallbackSink {
      gone: crate::host::teardown(),
      text: matches!(callback, Some(Callback::Text(_))),
      shared: callback.map(|cb| {
        Arc::new(Shared {
          cb,
          staged: Mutex::new(Staged::default()),
          queued: AtomicUsize::new(0),
          busy: AtomicBool::new(false),
          changed: Notify::new(),
        })
      }),
      open: OpenText::new(),
      open_bytes: Vec::new(),
      interval,
    }
  }

  fn open_len(&self) -> usize {
    self.open.len() + self.open_bytes.len()
  }

  /// The environment is gone: nobody will take the output, drop it (and
  /// all that is read from now on), so that the pump reads on to EOF and
  /// closes its pipe. True when that happened.
  fn let_go_if_gone(&mut self) -> bool {
    if !self.gone.is_cancelled() {
      return false;
    }
    if let Some(shared) = self.shared.take() {
      let mut st = shared.lock();
      st.chunks.clear();
      st.bytes = 0;
    }
    self.open = OpenText::new();
    self.open_bytes = Vec::new();
    true
  }

  /// The open chunk is staged (converted here, on the runtime's thread, so
  /// that the JS thread only copies).
  fn seal(&mut self, st: &mut Staged) {
    while let Some(text) = self.open.take() {
      st.bytes += text.len();
      let n = text.len();
      st.chunks.push_back((Ready::Text(text.into_js()), n));
    }
    if !self.open_bytes.is_empty() {
      let b = std::mem::replace(&mut self.open_bytes, crate::text::chunk_buffer(CHUNK));
      st.bytes += b.len();
      let n = b.len();
      st.chunks.push_back((Ready::Bytes(b), n));
    }
  }

  fn seal_now(&mut self) {
    if let Some(shared) = self.shared.clone() {
      let mut st = shared.lock();
      self.seal(&mut st);
    }
  }

  fn write_text(&mut self, mut data: &[u8]) {
    while !data.is_empty() {
      if self.open.is_full() {
        // (not reached: a full chunk is sealed as soon as it fills)
        self.seal_now();
      }
      let room = self.open.room();
      let take = room.len().min(data.len());
      // SAFETY: `&[u8]` and `&[MaybeUninit<u8>]` have the same layout
      room[..take].copy_from_slice(unsafe {
        &*(std::ptr::from_ref(&data[..take]) as *const [MaybeUninit<u8>])
      });
      self.open.filled(take);
      data = &data[take..];
      if self.open.is_full() {
        self.seal_now();
      }
    }
  }

  fn write_bytes(&mut self, mut data: &[u8]) {
    while !data.is_empty() {
      if self.open_bytes.capacity() == 0 {
        self.open_bytes = crate::text::chunk_buffer(CHUNK);
      }
      let take = (CHUNK - self.open_bytes.len()).min(data.len());
      self.open_bytes.extend_from_slice(&data[..take]);
      data = &data[take..];
      if self.open_bytes.len() == CHUNK {
        self.seal_now();
      }
    }
  }

  /// Hand over a batch unless one is in flight: the staged (full) chunks,
  /// and the open one too when `interval` has passed since the last batch or
  /// the stream ended (`flush`).
  fn maybe_send(&mut self, flush: bool) {
    let Some(shared) = self.shared.clone() else {
      return;
    };
    let mut st = shared.lock();
    if shared.busy.load(Ordering::Acquire) {
      return;
    }
    let due = flush || st.last_sent.is_none_or(|t| t.elapsed() >= self.interval);
    if due && st.chunks.len() < WINDOW {
      self.seal(&mut st);
    }
    shared.send_batch(&mut st);
  }

  /// Bytes read and not handed over.
  fn pending_len(&self) -> usize {
    self.shared.as_ref().map_or(0, |s| s.lock().bytes) + self.open_len()
  }
}

impl OutputSink for CallbackSink {
  fn write(&mut self, data: &[u8]) {
    if self.shared.is_none() {
      return;
    }
    if self.text {
      self.write_text(data);
    } else {
      self.write_bytes(data);
    }
    self.maybe_send(false);
  }

  /// The pump reads straight into what is left of the open chunk (one copy
  /// less: the pump's buffer into the chunk; reads into a part filled still
  /// coalesce); text is checked as UTF-8 where it lies (`OpenText`).
  fn lend(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
    self.shared.as_ref()?;
    if self.text {
      return Some(self.open.room());
    }
    if self.open_bytes.capacity() == 0 {
      self.open_bytes = crate::text::chunk_buffer(CHUNK);
    }
    let left = CHUNK - self.open_bytes.len();
    Some(&mut self.open_bytes.spare_capacity_mut()[..left])
  }

  fn filled(&mut self, n: usize) {
    if self.text {
      self.open.filled(n);
      if self.open.is_full() {
        self.seal_now();
      }
      self.maybe_send(false);
      return;
    }
    assert!(
      self.open_bytes.len() + n <= CHUNK,
      "a read fills at most the room lent"
    );
    // SAFETY: the pump's read wrote the first `n` bytes of the room `lend` gave
    unsafe { self.open_bytes.set_len(self.open_bytes.len() + n) };
    if self.open_bytes.len() == CHUNK {
      self.seal_now();
    }
    self.maybe_send(false);
  }

  fn next_tick(&self) -> Option<Instant> {
    let shared = self.shared.as_ref()?;
    let st = shared.lock();
    if st.bytes + self.open_len() == 0 {
      return None;
    }
    if shared.busy.load(Ordering::Acquire) {
      // look again shortly: the JS thread sends what is staged itself, only
      // the open chunk waits for the pump
      return Some(Instant::now() + Duration::from_millis(2));
    }
    if !st.chunks.is_empty() {
      return Some(Instant::now());
    }
    Some(
      st.last_sent
        .map_or_else(Instant::now, |t| t + self.interval),
    )
  }

  fn tick(&mut self) {
    self.maybe_send(false);
  }

  async fn ready(&mut self) {
    // backpressure: stop reading while a window's worth waits to be handed over
    let Some(shared) = self.shared.clone() else {
      return;
    };
    // text stops at two batches and reads on below that: reading ahead as
    // Buffer streams do took the strings' loop p99 up to Node's and their RSS
    // growth over 16 MiB (docs/PERFORMANCE.md, item 6)
    let (high, low) = if self.text {
      (TEXT_AHEAD * CHUNK, TEXT_AHEAD * CHUNK - 1)
    } else {
      (AHEAD * CHUNK, RESUME * CHUNK)
    };
    loop {
      if self.let_go_if_gone() {
        return;
      }
      self.maybe_send(false);
      let open = self.open_len();
      if self.pending_len() < high {
        return;
      }
      // woken when the JS thread took batches down to `low`, or let the
      // last one go with nothing staged (then the pump sends), or when the
      // environment went away under a batch that will never end
      tokio::select! {
        _ = shared.wait_until(|st, busy| st.bytes + open <= low || !busy) => {}
        _ = self.gone.cancelled() => {}
      }
    }
  }

  async fn finish(&mut self) {
    let Some(shared) = self.shared.clone() else {
      return;
    };
    // an incomplete character at the very end becomes U+FFFD
    self.open.finish();
    self.seal_now();
    loop {
      if self.let_go_if_gone() {
        return;
      }
      self.maybe_send(true);
      // every byte is delivered before the promise resolves
      let w = shared.changed.notified();
      tokio::pin!(w);
      w.as_mut().enable();
      {
        let st = shared.lock();
        if st.chunks.is_empty() && !shared.busy.load(Ordering::Acquire) {
          return;
        }
      }
      tokio::select! {
        _ = w => {}
        _ = self.gone.cancelled() => {}
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Feed `input` in pieces of the sizes `sizes` cycles through, as the pump
  /// does (into the room lent, sealed when full), and collect the chunks.
  fn chunked(input: &[u8], sizes: &[usize]) -> Vec<CheckedText> {
    let mut open = OpenText::new();
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < input.len() {
      let room = open.room();
      let n = sizes[i % sizes.len()].min(room.len()).min(input.len() - at);
      i += 1;
      for (d, s) in room[..n].iter_mut().zip(&input[at..at + n]) {
        d.write(*s);
      }
      open.filled(n);
      at += n;
      if open.is_full() || i % 7 == 0 {
        // full, or a partial chunk that is due
        out.extend(std::iter::from_fn(|| open.take()));
      }
    }
    open.finish();
    out.extend(std::iter::from_fn(|| open.take()));
    out
  }

  fn check(input: &[u8], sizes: &[usize]) {
    let chunks = chunked(input, sizes);
    let mut all = String::new();
    for c in &chunks {
      assert!(c.len() <= CHUNK, "a chunk of {} bytes", c.len());
      assert!(!c.bytes.is_empty());
      let s = std::str::from_utf8(&c.bytes).expect("every chunk is whole UTF-8");
      if c.ascii {
        assert!(s.is_ascii());
      }
      all.push_str(s);
    }
    assert_eq!(all, String::from_utf8_lossy(input), "sizes {sizes:?}");
  }

  #[test]
  fn text_chunks_match_a_lossy_decode_of_the_whole() {
    let mut input = Vec::new();
    let mut seed = 7u64;
    for _ in 0..40_000 {
      seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
      match (seed >> 33) % 16 {
        0 => input.extend_from_slice("é".as_bytes()),
        1 => input.extend_from_slice("😀".as_bytes()),
        2 => input.extend_from_slice("€".as_bytes()),
        3 => input.push(0xFF),
        4 => input.extend_from_slice(&[0xE2, 0x28]),
        5 => input.extend_from_slice(&[0xF0, 0x9F]),
        _ => input.extend_from_slice(b"abc"),
      }
    }
    for sizes in [
      &[1usize][..],
      &[2, 3],
      &[5, 64 * 1024],
      &[4096],
      &[65535, 1, 2],
      &[100_000],
    ] {
      check(&input, sizes);
    }
    // an incomplete character at the very end
    let mut cut = input.clone();
    cut.extend_from_slice(&[0xF0, 0x9F, 0x98]);
    check(&cut, &[3, 7]);
  }

  #[test]
  fn ascii_fills_whole_chunks_without_a_rescan() {
    let input = vec![b'x'; 3 * CHUNK + 10];
    let chunks = chunked(&input, &[CHUNK]);
    assert!(chunks.iter().all(|c| c.ascii));
    assert_eq!(
      chunks.iter().map(CheckedText::len).sum::<usize>(),
      input.len()
    );
    assert!(chunks.iter().filter(|c| c.len() == CHUNK).count() >= 3);
  }

  #[test]
  fn invalid_bytes_that_expand_past_a_chunk_are_cut_into_chunks() {
    // each 0xFF becomes 3 bytes of U+FFFD: one chunk of input makes three
    let input = vec![0xFFu8; CHUNK];
    check(&input, &[CHUNK]);
    let chunks = chunked(&input, &[CHUNK]);
    assert!(chunks.len() >= 3);
  }

  #[test]
  fn a_character_is_never_split_between_chunks() {
    // 4-byte characters straddling every chunk boundary
    let mut input = vec![b'a'; CHUNK - 2];
    for _ in 0..(2 * CHUNK / 4) {
      input.extend_from_slice("😀".as_bytes());
    }
    check(&input, &[CHUNK]);
    check(&input, &[CHUNK - 1, 3]);
  }
}
