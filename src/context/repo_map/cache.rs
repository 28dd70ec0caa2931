//! The tag cache: each project's files' tags as last read, so a map reparses only the files
//! that changed.
//!
//! One file per project under `<data dir>/repo-maps/`, beside the session database rather
//! than in it: it is derived data any tern process may read and rewrite while another owns
//! the database, and losing it costs one cold scan. It is written whole to a temporary file
//! and renamed over the old one, never synced; a file that is damaged, of another format, or
//! written with other grammars or queries is ignored and replaced.
//!
//! A file's tags are reused when its size and modification time are those cached and that
//! time is well before the cache was written; a file changed within the same clock tick as
//! its last read would look unchanged, so one whose time is close to the write is compared
//! by a hash of its content instead.

use super::lang::{Lang, QUERIES_VERSION, TagKind};
use super::scan::{Candidate, Left, ScannedFile};
use super::tags::{Definition, FileTags};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const MAGIC: &[u8; 8] = b"TERNTAGS";
/// Bump when the layout below changes.
const FORMAT: u32 = 2;
/// A file modified less than this before the cache was written is checked by its content.
const RACY_NS: i64 = 2_000_000_000;
/// A project's cache nobody read for this long is removed when another is written.
const KEEP_UNREAD: Duration = Duration::from_secs(30 * 24 * 3600);
/// A cache read this long after it was last written or read has its time set to now, so
/// one in use is never taken for unread.
const MARK_READ_AFTER: Duration = Duration::from_secs(24 * 3600);
/// A temporary file a write left (its process died) is removed after this.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// The cached tags of one file, with what identifies the version they were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: u64,
    /// Its tags, or why it was left out (a binary file stays binary until it changes).
    pub tags: Result<FileTags, Left>,
}

/// A project's cache as loaded: path → cached tags.
#[derive(Debug, Default)]
pub struct Cache {
    pub entries: BTreeMap<String, Cached>,
    /// When it was written, in nanoseconds since the epoch.
    written_ns: i64,
}

/// What a scan with the cache did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reuse {
    /// Files whose tags came from the cache.
    pub reused: usize,
    /// Files read and parsed now.
    pub parsed: usize,
    /// Files whose tags were reused after comparing their content (their time was too
    /// close to the cache's): the cache is written again, so next time their time decides.
    pub verified: usize,
}

impl Reuse {
    pub fn add(&mut self, other: Reuse) {
        self.reused += other.reused;
        self.parsed += other.parsed;
        self.verified += other.verified;
    }
}

/// Where the caches live under tern's data directory.
pub fn dir_in(data_dir: &Path) -> PathBuf {
    data_dir.join("repo-maps")
}

/// The cache file of the project at `root` under `dir`.
pub fn file_for(dir: &Path, root: &Path) -> PathBuf {
    let key = fnv64(root.as_os_str().as_encoded_bytes());
    dir.join(format!("{key:016x}.tags"))
}

/// The grammars and queries the cached tags were read with: tags read with others are not
/// reused.
fn fingerprint() -> String {
    // The build's version too: how tags are read (reference kinds, signatures) may change
    // without the queries'.
    let mut text = format!(
        "queries {QUERIES_VERSION} tern {}",
        env!("CARGO_PKG_VERSION")
    );
    for lang in Lang::ALL {
        let language = lang.language();
        text.push_str(&format!(
            " {}:{}:{}:{}",
            lang.name(),
            language.abi_version(),
            language.node_kind_count(),
            language.field_count()
        ));
    }
    text
}

/// Loads the cache of `root` from `file`; an empty one when there is none or it cannot be
/// used.
pub fn load(file: &Path, root: &Path) -> Cache {
    let Ok(bytes) = std::fs::read(file) else {
        return Cache::default();
    };
    match decode(&bytes, root) {
        Some(cache) => {
            mark_read(file);
            cache
        }
        None => {
            tracing::info!(file = %file.display(), "the repository map's tag cache is unusable; reading every file");
            Cache::default()
        }
    }
}

/// Sets the time of `file`, a cache just read, to now when it was last set long ago.
fn mark_read(file: &Path) {
    let old = std::fs::metadata(file)
        .and_then(|meta| meta.modified())
        .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > MARK_READ_AFTER));
    if old && let Ok(opened) = std::fs::File::options().write(true).open(file) {
        let _ = opened.set_modified(SystemTime::now());
    }
}

/// Removes from `dir` the caches nobody read for [`KEEP_UNREAD`] and the temporary files
/// of writes that never finished; returns how many went.
pub fn prune(dir: &Path) -> usize {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let keep_for = if name.ends_with(".tags") {
            KEEP_UNREAD
        } else if name.contains(".tmp-") {
            STALE_TEMPORARY
        } else {
            continue;
        };
        let age = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|at| at.elapsed().ok());
        if age.is_some_and(|age| age > keep_for) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Writes the tags of `files` and the files `left` out (with why) as the cache of `root` in
/// `file`, replacing it whole.
/// `read_at_ns` is when the walk began: a file changed after it may have been read before
/// the change.
pub fn save(
    file: &Path,
    root: &Path,
    files: &[ScannedFile],
    left: &[(Candidate, u64, Left)],
    read_at_ns: i64,
) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes = encode(root, files, left, read_at_ns);
    // Unique to this write: maps of one project may be written at once in one process.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = file.with_extension(format!("tmp-{}-{write}", std::process::id()));
    std::fs::write(&temporary, &bytes)?;
    std::fs::rename(&temporary, file).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })?;
    if let Some(dir) = file.parent() {
        prune(dir);
    }
    Ok(())
}

/// A file's tags (or why it has none) and its content's hash.
pub type Read = (Result<FileTags, Left>, u64);

/// What the cache holds for one file.
pub enum Held {
    /// Its tags, still its own: its size and time match, well before the cache was written.
    Current(Read),
    /// Tags whose file changed too close to the cache's writing to trust its time: its
    /// content decides ([`verify`]).
    Doubtful(Cached),
    Nothing,
}

/// Takes what `cache` holds for `candidate` out of it.
pub fn take(cache: &mut Cache, candidate: &Candidate) -> Held {
    let Some(cached) = cache.entries.remove(&candidate.path) else {
        return Held::Nothing;
    };
    if cached.size != candidate.size || cached.mtime_ns != candidate.mtime_ns {
        return Held::Nothing;
    }
    if cached
        .tags
        .as_ref()
        .is_ok_and(|tags| tags.lang != candidate.lang)
    {
        return Held::Nothing;
    }
    if candidate.mtime_ns < cache.written_ns.saturating_sub(RACY_NS) {
        return Held::Current((cached.tags, cached.hash));
    }
    Held::Doubtful(cached)
}

/// The doubtful `cached` tags of `candidate`, when its content is still what they were
/// read from.
pub fn verify(cached: Cached, candidate: &Candidate) -> Option<Read> {
    let content = std::fs::read(&candidate.absolute).ok()?;
    (fnv64(&content) == cached.hash).then_some((cached.tags, cached.hash))
}

/// Reads `candidate` now: its tags (or why it has none) and its content's hash; `None` when
/// it cannot be read at all.
pub fn read_fresh(candidate: &Candidate, parser: &mut tree_sitter::Parser) -> Option<Read> {
    let source = std::fs::read(&candidate.absolute).ok()?;
    let hash = fnv64(&source);
    Some((super::scan::tags_of(candidate.lang, &source, parser), hash))
}

/// FNV-1a, 64 bits: stable across builds and platforms, unlike the standard hasher.
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The cache file's checksum: FNV-1a's step taken a little-endian word at a time, so a
/// file of megabytes costs a fraction of a millisecond. Each step is a bijection of the
/// running hash, so any one word changed changes the sum.
pub fn checksum(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = (hash ^ u64::from_le_bytes(word)).wrapping_mul(PRIME);
        hash ^= hash >> 32;
    }
    for byte in words.remainder() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(PRIME);
    }
    hash ^ bytes.len() as u64
}

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn encode(
    root: &Path,
    files: &[ScannedFile],
    left: &[(Candidate, u64, Left)],
    written_ns: i64,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, FORMAT);
    put_str(&mut out, &fingerprint());
    put_bytes(&mut out, root.as_os_str().as_encoded_bytes());
    put_u64(&mut out, written_ns as u64);
    // Every name referred to, once; the files' references point into this table.
    let mut table: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    for file in files {
        for (name, _) in &file.tags.references {
            table.entry(name).or_insert_with(|| {
                names.push(name);
                (names.len() - 1) as u32
            });
        }
    }
    put_u32(&mut out, names.len() as u32);
    for name in &names {
        put_str(&mut out, name);
    }
    put_u32(&mut out, (files.len() + left.len()) as u32);
    let head = |out: &mut Vec<u8>, c: &Candidate, hash: u64| {
        put_str(out, &c.path);
        put_u64(out, c.size);
        put_u64(out, c.mtime_ns as u64);
        put_u64(out, hash);
    };
    for file in files {
        head(&mut out, &file.candidate, file.hash);
        out.push(0);
        out.push(lang_code(file.tags.lang));
        put_u32(&mut out, file.tags.definitions.len() as u32);
        for def in &file.tags.definitions {
            put_str(&mut out, &def.name);
            out.push(kind_code(def.kind));
            put_u32(&mut out, def.line);
            put_str(&mut out, &def.signature);
        }
        put_u32(&mut out, file.tags.references.len() as u32);
        for (name, count) in &file.tags.references {
            put_u32(&mut out, table.get(&**name).copied().unwrap_or(0));
            put_u32(&mut out, *count);
        }
    }
    for (candidate, hash, why) in left {
        head(&mut out, candidate, *hash);
        out.push(left_code(*why));
    }
    let sum = checksum(&out);
    put_u64(&mut out, sum);
    out
}

/// How an entry says why its file was left out; 0 means its tags follow.
fn left_code(left: Left) -> u8 {
    match left {
        Left::TooLarge => 1,
        Left::Binary => 2,
        Left::Unparsable => 3,
    }
}

fn left_of(code: u8) -> Option<Left> {
    Some(match code {
        1 => Left::TooLarge,
        2 => Left::Binary,
        3 => Left::Unparsable,
        _ => return None,
    })
}

fn decode(bytes: &[u8], root: &Path) -> Option<Cache> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if checksum(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut r = Reader { bytes: body };
    if r.take(8)? != MAGIC || r.u32()? != FORMAT || r.str()? != fingerprint() {
        return None;
    }
    if r.take_len()? != root.as_os_str().as_encoded_bytes() {
        return None;
    }
    let written_ns = r.u64()? as i64;
    let names = (0..r.u32()?)
        .map(|_| r.str().map(Arc::<str>::from))
        .collect::<Option<Vec<_>>>()?;
    let count = r.u32()?;
    let mut entries = BTreeMap::new();
    for _ in 0..count {
        let path = r.str()?.to_owned();
        let size = r.u64()?;
        let mtime_ns = r.u64()? as i64;
        let hash = r.u64()?;
        let code = r.u8()?;
        if code != 0 {
            let cached = Cached {
                size,
                mtime_ns,
                hash,
                tags: Err(left_of(code)?),
            };
            entries.insert(path, cached);
            continue;
        }
        let lang = lang_of(r.u8()?)?;
        let mut definitions = Vec::new();
        for _ in 0..r.u32()? {
            let name = r.str()?.to_owned();
            let kind = kind_of(r.u8()?)?;
            let line = r.u32()?;
            let signature = r.str()?.to_owned();
            definitions.push(Definition {
                name,
                kind,
                line,
                signature,
            });
        }
        let mut references = Vec::new();
        for _ in 0..r.u32()? {
            let name = names.get(r.u32()? as usize)?.clone();
            references.push((name, r.u32()?));
        }
        let tags = FileTags {
            lang,
            definitions,
            references,
        };
        entries.insert(
            path,
            Cached {
                size,
                mtime_ns,
                hash,
                tags: Ok(tags),
            },
        );
    }
    r.bytes.is_empty().then_some(Cache {
        entries,
        written_ns,
    })
}

fn lang_code(lang: Lang) -> u8 {
    lang as u8
}

fn lang_of(code: u8) -> Option<Lang> {
    Lang::ALL.get(usize::from(code)).copied()
}

fn kind_code(kind: TagKind) -> u8 {
    kind as u8
}

fn kind_of(code: u8) -> Option<TagKind> {
    TagKind::ALL.get(usize::from(code)).copied()
}

fn put_u32(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_bytes(out, text.as_bytes());
}

/// Reads the encoding back; `None` at the first thing out of place.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn take_len(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.take_len()?).ok()
    }
}
