// The edge handler's paging (src/paging.rs): the page a query asks for, its `next` and
// `previous`, the page files the tree holds, read checked and sliced as raw text, and the page
// rendered. Printed after list.js, in the same module (src/hosts/edge.rs).

// Rust counterparts (see handler.js):
//   pageOf            src/paging.rs        requested
//   nextPage          src/paging.rs        next
//   nextLinked        src/paging.rs        next_linked
//   previousPage      src/paging.rs        previous
//   holds             src/paging.rs        precomputed_pages
//   renderPage        src/paging.rs        render_page

/** The page `limit` and `offset` (as sent) ask for (src/paging.rs `requested`), or `{bad}`. */
function pageOf(facts, limit, offset) {
  const l = number("limit", limit);
  if (l.bad) return l;
  const o = number("offset", offset);
  if (o.bad) return o;
  const defaultLimit = BigInt(facts.default_limit);
  return { offset: o.value ?? 0n, limit: l.value === null || l.value === 0n ? defaultLimit : l.value };
}

const min = (a, b) => (a < b ? a : b);

/** The page file at `path` of a list of `count` entries, checked: its `count` says so, and it
 * holds the `entries` the list has there. */
async function pageFile(origin, path, count, entries) {
  const bytes = await mustGet(origin, path);
  checkPage(bytes, path, count, entries);
  return bytes;
}

function checkPage(bytes, path, count, entries) {
  if (pageCount(bytes) !== count) throw new OriginFault(503, `${path} is not a page of a list of ${count} entries`);
  const held = countEntries(bytes);
  if (held !== entries) throw new OriginFault(503, `${path} holds ${held} entries where its list has ${entries}`);
}

/** The `count` a page file starts with (as the page renderer writes it), `null` when none. */
function pageCount(bytes) {
  const head = new TextDecoder().decode(bytes.subarray(0, 64));
  const found = /^\s*\{\s*"count"\s*:\s*([0-9]+)[,\s]/.exec(head);
  return found === null ? null : BigInt(found[1]);
}

/**
 * Calls `onEntry(start, end)` with the byte range of each entry of a page document's `results`
 * (the objects at nesting depth 3), scanning its bytes once: the structural characters are
 * ASCII, so no byte of a multi-byte character is taken for one.
 */
function scanEntries(bytes, onEntry) {
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 92) i++;
      else if (c === 34) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 123 || c === 91) {
      depth++;
      if (c === 123 && depth === 3) start = i;
    } else if (c === 125 || c === 93) {
      if (c === 125 && depth === 3) onEntry(start, i + 1);
      depth--;
    }
  }
}

/** The number of entries of a page document's `results`, as [`scanEntries`] finds them. */
function countEntries(bytes) {
  let count = 0n;
  scanEntries(bytes, () => count++);
  return count;
}

/** The page `next` points to by the public API's rule (the last page's limit shrinks). */
function nextPage(page, count) {
  const end = min(page.offset + page.limit, MAX_U64);
  return count > end ? { offset: end, limit: min(page.limit, count - end) } : null;
}

/** The page `next` links to in a tree with links `style` (src/paging.rs `next_linked`): for path
 * links the same offset with the limit kept, naming the page file of the aligned chain. */
function nextLinked(page, count, style) {
  const next = nextPage(page, count);
  return next !== null && style === "path" ? { offset: next.offset, limit: page.limit } : next;
}

/** The page `previous` points to (src/paging.rs `previous`), `null` on the first. */
function previousPage(page) {
  return page.offset > 0n ? { offset: page.offset > page.limit ? page.offset - page.limit : 0n, limit: min(page.limit, page.offset) } : null;
}

/** True when the tree holds `page` as a file: an aligned page of a page size, or (query links)
 * the shrunken last page that `next` names (docs/tree.md, "Page files"). */
function holds(facts, count, page) {
  for (const s of facts.page_sizes) {
    const size = BigInt(s);
    const aligned = count === 0n ? 1n : (count + size - 1n) / size;
    if (page.limit === size && page.offset % size === 0n && page.offset / size < aligned) return true;
    const last = (aligned - 1n) * size;
    if (facts.links === "query" && last > 0n && page.offset === last && page.limit === count - last) return true;
  }
  return false;
}

/** The raw text of each entry of a page document's `results`, as [`scanEntries`] finds them. */
function entriesOf(bytes) {
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  const entries = [];
  scanEntries(bytes, (start, end) => entries.push(decoder.decode(bytes.subarray(start, end))));
  return entries;
}

/** A list page in the API's key order, as gen's page renderer writes it (src/paging.rs). */
function renderPage(count, next, previous, entries, pretty) {
  const [open, sep, colon, nl, indent] = pretty ? ["{\n", ",\n", ": ", "\n", "  "] : ["{", ",", ":", "", ""];
  const field = (key) => `${indent}"${key}"${colon}`;
  let out = `${open}${field("count")}${count}${sep}`;
  for (const [key, link] of [["next", next], ["previous", previous]]) {
    out += `${field(key)}${link === null ? "null" : JSON.stringify(link)}${sep}`;
  }
  out += field("results");
  if (entries.length === 0) {
    out += "[]";
  } else {
    out += "[";
    entries.forEach((entry, i) => {
      if (i > 0) out += ",";
      if (pretty) out += "\n    ";
      out += entry;
    });
    out += `${nl}${indent}]`;
  }
  return `${out}${nl}}`;
}
