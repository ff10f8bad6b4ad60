// The edge handler's archive origin (docs/archive.md; docs/deploy.md, "An archive at the
// edge"): the tree's files read out of an archive, `root` plus content-named `parts/`, by byte
// ranges. It offers the `get`/`stream` of the origins in origin.js, over a range source: HTTP
// `Range` requests against a base url, an R2 bucket (`get(key, {range})`), a folder. Printed
// after origin.js, in the same module (src/hosts/edge.rs); used when FACTS.archive is set.
//
// A record is at most 2 origin reads cold (its directory block, then its document) and 1 warm
// (blocks are immutable, named by their hash: kept in the isolate, and in Workers in the Cache
// API too). The root is read once and re-read when older than ROOT_MAX_AGE_MS. What the
// reader checks: gzip's CRC-32 and length on every blob (DecompressionStream), each document's
// decompressed size against its entry, each range against the sizes the root gives. BLAKE3,
// the format's hash, is not in WebCrypto: a block or a document that is an undamaged gzip
// member of the right size, but not the one named, is not caught here (`gen publish` uploads
// parts under their hash, and `gen build` checks them).

/** The root is read again when the one held is older than this (a publish replaces it). */
const ROOT_MAX_AGE_MS = 60000;
/** Directory blocks held decoded in the isolate, the least recently used dropped first. */
const MAX_HELD_BLOCKS = 64;
/** The root is at most this large stored (about 90 bytes a block of 1,024 keys). */
const MAX_ROOT_BYTES = 64 << 20;

/** `bytes` decompressed (one gzip member, its CRC-32 and length checked), or a 503 naming `what`. */
async function gunzip(bytes, what) {
  try {
    const body = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(body).arrayBuffer());
  } catch (e) {
    throw new OriginFault(503, `${what} is damaged: not a whole gzip member (${e?.message ?? e})`);
  }
}

/** A reader of the varints, strings and hashes of docs/archive.md, a 503 naming `what` past the end. */
function decoder(bytes, what) {
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw new OriginFault(503, `${what} is damaged: it ends at byte ${bytes.length}, inside a field`);
  };
  const take = (n) => {
    need(n);
    at += n;
    return bytes.subarray(at - n, at);
  };
  const varint = () => {
    let value = 0;
    for (let shift = 1, i = 0; i < 10; i++, shift *= 128) {
      const b = take(1)[0];
      value += (b & 127) * shift;
      if (b < 128) return value;
    }
    throw new OriginFault(503, `${what} is damaged: a varint longer than 10 bytes`);
  };
  return { take, varint, bytes: () => take(varint()), end: () => at === bytes.length };
}

const hexOf = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const utf8 = new TextDecoder();

/** Compares two byte strings as the archive orders keys (bytewise). */
function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** The root, decompressed: `{parts: Map(hex → size), blocks: [{first, part, offset, length, hash}]}`. */
function decodeRoot(bytes) {
  const d = decoder(bytes, "the archive's root");
  if (utf8.decode(d.take(8)) !== "GENAPIAR") throw new OriginFault(503, "the archive's root is not an archive's root (no GENAPIAR)");
  const version = d.take(2);
  if (version[0] + version[1] * 256 !== 1) throw new OriginFault(503, `the archive's root is version ${version[0] + version[1] * 256}, this handler reads 1`);
  d.varint(); // edits since the last full write
  const names = [];
  const parts = new Map();
  for (let n = d.varint(), i = 0; i < n; i++) {
    const name = hexOf(d.take(32));
    parts.set(name, d.varint());
    d.take(1);
    names.push(name);
  }
  const blocks = [];
  for (let m = d.varint(), i = 0; i < m; i++) {
    const first = d.bytes().slice();
    const part = names[d.varint()];
    const block = { first, part, offset: d.varint(), length: d.varint(), hash: hexOf(d.take(32)), entries: d.varint() };
    for (let k = d.varint(), j = 0; j < k; j++) d.varint();
    if (part === undefined) throw new OriginFault(503, "the archive's root is damaged: a block in a part it does not name");
    blocks.push(block);
  }
  if (!d.end()) throw new OriginFault(503, "the archive's root is damaged: bytes after its last block");
  return { parts, blocks };
}

/** The directory block `block` of the root, decompressed: a Map from key to `{part, offset,
 * length, size}`, refused unless it holds the keys the root says (its first, how many). */
function decodeBlock(bytes, what, block) {
  const d = decoder(bytes, what);
  if (utf8.decode(d.take(4)) !== "GAB1") throw new OriginFault(503, `${what} is not a directory block (no GAB1)`);
  const parts = [];
  for (let n = d.varint(), i = 0; i < n; i++) parts.push(hexOf(d.take(32)));
  for (let n = d.varint(), i = 0; i < n; i++) d.bytes();
  const entries = new Map();
  let key = new Uint8Array(0);
  for (let e = d.varint(), i = 0; i < e; i++) {
    const shared = d.varint();
    const suffix = d.bytes();
    if (shared > key.length) throw new OriginFault(503, `${what} is damaged: a key shares more than the key before it`);
    const next = new Uint8Array(shared + suffix.length);
    next.set(key.subarray(0, shared));
    next.set(suffix, shared);
    key = next;
    const part = parts[d.varint()];
    const entry = { part, offset: d.varint(), length: d.varint(), size: d.varint() };
    d.varint(); // media type
    d.take(32); // BLAKE3 of the document: not checkable here (no BLAKE3 in WebCrypto)
    if (part === undefined) throw new OriginFault(503, `${what} is damaged: an entry in a part it does not name`);
    if (i === 0 && compareBytes(key, block.first) !== 0) throw new OriginFault(503, `${what} is not the block the archive's root names: another first key`);
    entries.set(utf8.decode(key), entry);
  }
  if (entries.size !== block.entries) throw new OriginFault(503, `${what} is not the block the archive's root names: ${entries.size} keys, not ${block.entries}`);
  if (!d.end()) throw new OriginFault(503, `${what} is damaged: bytes after its last entry`);
  return entries;
}

/** The root of the archive `ranges` reads, held ROOT_MAX_AGE_MS: a function giving it (a promise). */
function heldRoot(ranges) {
  let root = null;
  const read = async () => {
    const stored = await ranges.readAll("root", MAX_ROOT_BYTES);
    if (stored === null) throw new OriginFault(503, "the archive's origin holds no root");
    return decodeRoot(await gunzip(stored, "the archive's root"));
  };
  return () => {
    if (root !== null && Date.now() - root.at < ROOT_MAX_AGE_MS) return root.read;
    const reading = read();
    root = { at: Date.now(), read: reading };
    // a root that could not be read is read again by the next request
    reading.catch(() => {
      if (root?.read === reading) root = null;
    });
    return reading;
  };
}

/** The size of the part `part` (hex) as the root `parts` gives it, checked to hold `length` bytes at `offset`. */
function partSize(parts, part, offset, length, what) {
  const total = parts.get(part);
  if (total === undefined) throw new OriginFault(503, `${what} is in the part ${part}, which the archive's root does not name`);
  if (offset + length > total) throw new OriginFault(503, `${what} lies past the end of parts/${part} (${total} bytes)`);
  return total;
}

/** The stored bytes at `offset`, `length` of the part `part` (hex), read from `ranges`: one read, checked. */
async function readPart(ranges, parts, part, offset, length, what) {
  const total = partSize(parts, part, offset, length, what);
  const bytes = await ranges.read(`parts/${part}`, offset, length, total);
  if (bytes === null) throw new OriginFault(503, `the archive's root names parts/${part}, which the origin does not hold`);
  if (bytes.length !== length) throw new OriginFault(503, `parts/${part} is truncated: ${length} bytes wanted at byte ${offset}, ${bytes.length} came`);
  return bytes;
}

/**
 * The directory blocks of the archive `ranges` reads, held decoded (the last MAX_HELD_BLOCKS)
 * and, with `cache` (the Workers Cache API's), kept there stored: a function giving the entries
 * of a block of the root `parts` names (at most one read).
 */
function heldBlocks(ranges, cache) {
  const blocks = new Map();
  const cached = async (url, block, what) => {
    const found = cache === null ? undefined : await cache.match(url).catch(() => undefined);
    if (found === undefined) return null;
    const stored = new Uint8Array(await found.arrayBuffer());
    if (stored.length !== block.length) return null;
    return gunzip(stored, what).then((bytes) => decodeBlock(bytes, what, block)).catch(() => null);
  };
  const load = async (parts, block) => {
    const what = `the directory block at byte ${block.offset} of parts/${block.part}`;
    const url = `https://gen-archive.invalid/blocks/${block.hash}`;
    const entries = await cached(url, block, what);
    if (entries !== null) return entries;
    const stored = await readPart(ranges, parts, block.part, block.offset, block.length, what);
    const read = decodeBlock(await gunzip(stored, what), what, block);
    if (cache !== null) {
      const headers = { "Cache-Control": "public, max-age=31536000, immutable", "Content-Type": "application/octet-stream" };
      await cache.put(url, new Response(stored, { headers })).catch(() => {});
    }
    return read;
  };
  // requests that want a block being read wait for that one read
  const reading = new Map();
  return async (parts, block) => {
    const held = blocks.get(block.hash);
    if (held !== undefined) {
      blocks.delete(block.hash);
      blocks.set(block.hash, held);
      return held;
    }
    let pending = reading.get(block.hash);
    if (pending === undefined) {
      pending = load(parts, block).finally(() => reading.delete(block.hash));
      reading.set(block.hash, pending);
    }
    const entries = await pending;
    blocks.set(block.hash, entries);
    if (blocks.size > MAX_HELD_BLOCKS) blocks.delete(blocks.keys().next().value);
    return entries;
  };
}

/**
 * An origin reading the tree's files out of the archive that `ranges` reads (`read(file,
 * offset, length, total)` → bytes or `null` when the file is missing; `readAll(file, maxBytes)`;
 * `stream(file, offset, length, total)`), as origin.js's origins read them from a tree. `cache`:
 * the Workers Cache API's cache, where the blocks read are kept too.
 */
function archiveOrigin(ranges, cache = null) {
  const current = heldRoot(ranges);
  const blockOf = heldBlocks(ranges, cache);
  /** `{parts, entry}` of `path`, `entry` null when the archive holds no such key. */
  const find = async (path) => {
    const { parts, blocks: list } = await current();
    const key = new TextEncoder().encode(path);
    let low = 0;
    let high = list.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (compareBytes(list[middle].first, key) <= 0) low = middle + 1;
      else high = middle;
    }
    if (low === 0) return { parts, entry: null };
    const entries = await blockOf(parts, list[low - 1]);
    return { parts, entry: entries.get(path) ?? null };
  };
  return {
    ready: ranges.ready && (async () => (await ranges.ready(), await current())),
    /** The document at `path`, decompressed and checked; `null` when the archive holds none. */
    async get(path, maxBytes = Infinity) {
      const found = await this.getStored(path, maxBytes);
      return found === null ? null : found.bytes;
    },
    /**
     * The document at `path` as `{bytes, gzip}`: decompressed, and its stored gzip member, which
     * a client that takes gzip is sent as it is (checked first: decompressed, its CRC-32 and
     * length, and its entry's size); `null` when the archive holds none.
     */
    async getStored(path, maxBytes = Infinity) {
      const { parts, entry } = await find(path);
      if (entry === null) return null;
      if (entry.size > maxBytes) throw tooLarge(path, maxBytes);
      const stored = await readPart(ranges, parts, entry.part, entry.offset, entry.length, path);
      const bytes = await gunzip(stored, `${path} (at byte ${entry.offset} of parts/${entry.part})`);
      if (bytes.length !== entry.size) throw new OriginFault(503, `${path} is damaged: ${bytes.length} bytes where its entry says ${entry.size}`);
      return { bytes, gzip: stored };
    },
    /** A bulk-data file as a stream of its bytes (gzip already), `{body, size, etag}`, or `null`. */
    async stream(path) {
      const { parts, entry } = await find(path);
      if (entry === null) return null;
      const total = partSize(parts, entry.part, entry.offset, entry.length, path);
      const body = await ranges.stream(`parts/${entry.part}`, entry.offset, entry.length, total);
      if (body === null) throw new OriginFault(503, `the archive's root names parts/${entry.part}, which the origin does not hold`);
      const checked = body.pipeThrough(exactly(entry.length, path)).pipeThrough(new DecompressionStream("gzip")).pipeThrough(exactly(entry.size, path));
      return { body: checked, size: entry.size, etag: bulkEtag(path) };
    },
  };
}

/** A stream that passes on exactly `length` bytes, erroring when more or fewer come. */
function exactly(length, path) {
  let seen = 0;
  return new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > length) controller.error(new OriginFault(503, `${path} is damaged: longer than its entry says`));
      else controller.enqueue(chunk);
    },
    flush(controller) {
      if (seen !== length) controller.error(new OriginFault(503, `${path} is truncated: ${seen} of ${length} bytes`));
    },
  });
}
