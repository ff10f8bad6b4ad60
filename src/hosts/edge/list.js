// The edge handler's list answers (src/serve/list.rs): a list's page, narrowed by declared
// filters (src/filters.rs) or a `?q=` search (src/search.rs), read from the tree's page files.
// Printed after route.js, in the same module (src/hosts/edge.rs).

// Rust counterparts (see handler.js):
//   listAnswer        src/serve/list.rs    answer
//   listPage          src/serve/list.rs    page
//   fold              src/search.rs        fold
//   encodeQueryValue  src/search.rs        encode_query_value
//   orderConditions   src/filters.rs       order_conditions
//   ignoredParams     src/filters.rs       ignored
//   ignoredHeader     src/filters.rs       ignored_header
//   folderName        src/tree/layout.rs   folder_name
//   narrowedPage      src/serve/list.rs    narrowed
//   matchingNames     src/serve/list.rs    matching_names
//   sha256Hex         src/search.rs        sha256_hex

const MAX_IGNORED_NAMED = 16;
const MAX_IGNORED_NAME = 64;

/**
 * The answer to `query` of the list of `segment`, asking for `page` (src/serve/list.rs `answer`):
 * the parameters matched against the declared filters (a resource without filters ignores them,
 * as the public API does), then the page, narrowed or not.
 */
async function listAnswer(facts, origin, segment, query, page) {
  const declared = facts.filters[segment] ?? [];
  const conditions = orderConditions(declared, declared.length === 0 ? [] : query.conditions);
  if (conditions.bad !== undefined) {
    return { status: 400, error: fill(facts, facts.errors.not_a_filter[segment], { Value: conditions.bad }) };
  }
  // each condition may be one read of its value's list: bounded, as gen serve bounds it
  if (conditions.length > facts.max_conditions) return { status: 400, error: fill(facts, facts.errors.too_many_filters, {}) };
  if (query.q === null && conditions.length === 0) {
    return listPage(facts, origin, segment, BigInt(facts.resources[segment]), page);
  }
  return narrowedPage(facts, origin, segment, query.q, conditions, page);
}

/** The path of a tree file under the list of `segment`. */
function listFile(segment, rest) {
  return `api/v2/${segment}/${rest}index.json`;
}

/**
 * `page` of the list of `segment` (`count` entries): a file of the tree, or rendered from them.
 * `folder` (under `api/v2/`) and `tail` name another list of the same entries' shape: a filter's
 * value's list, whose page files are in its own folder and whose query links carry `tail`.
 */
async function listPage(facts, origin, segment, count, page, folder = segment, tail = "") {
  if (page.offset === 0n && page.limit >= count) return pageFile(origin, listFile(folder, "_pages/all/"), count, count);
  if (holds(facts, count, page)) {
    const held = min(page.limit, count - page.offset);
    return pageFile(origin, listFile(folder, `_pages/${page.limit}/${page.offset}/`), count, held);
  }
  const start = min(page.offset, count);
  const end = min(min(page.offset + page.limit, MAX_U64), count);
  let entries = [];
  if (start < end) {
    const size = facts.page_sizes.map(BigInt).find((s) => s >= page.limit);
    if (size === undefined) {
      const all = entriesOf(await pageFile(origin, listFile(folder, "_pages/all/"), count, count));
      entries = all.slice(Number(start), Number(end));
    } else {
      // at most two aligned pages of `size` hold entries [start, end), as limit ≤ size
      const first = start / size;
      const last = (end - 1n) / size;
      for (let k = first; k <= last; k++) {
        // the page holding the whole list is `_pages/all/` (a filter's value list has no other)
        const path = listFile(folder, k === 0n && size >= count ? "_pages/all/" : `_pages/${size}/${k * size}/`);
        entries.push(...entriesOf(await pageFile(origin, path, count, min(size, count - k * size))));
      }
      entries = entries.slice(Number(start - first * size), Number(end - first * size));
    }
  }
  const url = `${facts.base_url}/api/v2/${segment}/`;
  const files = `${facts.base_url}/api/v2/${folder}/`;
  const link = (p) =>
    p === null ? null : facts.links === "path" ? `${files}_pages/${p.limit}/${p.offset}/` : `${url}?offset=${p.offset}&limit=${p.limit}${tail}`;
  const next = nextLinked(page, count, facts.links);
  return new TextEncoder().encode(renderPage(count, link(next), link(previousPage(page)), entries, facts.pretty));
}

async function mustGet(origin, path) {
  const body = await origin.get(path);
  if (body === null) throw new Error(`it holds no ${path}, which the tree's manifest lists: publish the whole tree, or print the handler again for the tree published`);
  return body;
}

/**
 * `q` folded for matching, as src/search.rs folds it (the names document holds names folded
 * so by the build): NFKD, combining marks removed, case folded, final sigma as sigma.
 */
function fold(text) {
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toUpperCase().toLowerCase().replaceAll("ς", "σ");
}

/** `text` percent-encoded for a query value: every byte but `A-Za-z0-9-._~`, as src/search.rs does. */
function encodeQueryValue(text) {
  let out = "";
  for (const b of new TextEncoder().encode(text)) {
    const keep = isAlphanumeric(b) || b === 45 || b === 46 || b === 95 || b === 126;
    out += keep ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * The conditions `given`, as `[field index, value]` pairs ordered by the field's place among the
 * `declared` names, then as given, each once (src/filters.rs, `order_conditions`); `{bad: name}`
 * for the first parameter that is no declared filter.
 */
function orderConditions(declared, given) {
  const out = [];
  for (const [name, value] of given) {
    const field = declared.indexOf(name);
    if (field < 0) return { bad: name };
    if (!out.some(([f, v]) => f === field && v === value)) out.push([field, value]);
  }
  return out.map((c, i) => [c, i]).sort((a, b) => a[0][0] - b[0][0] || a[1] - b[1]).map(([c]) => c);
}

/** The names of `params` that are no `declared` filter: the parameters a list answer ignored. */
function ignoredParams(declared, params) {
  return params.filter((name) => !declared.includes(name));
}

/**
 * The Gen-Ignored header's value for the `ignored` parameters of a list that declares the
 * filters `declared`, `null` for none (docs/serve.md, "Ignored parameters"): each name encoded as
 * a query value, at most 16 of at most 64 characters, the others counted (`(3 more)`).
 */
function ignoredHeader(declared, ignored) {
  if (ignored.length === 0) return null;
  const named = [];
  let more = 0;
  for (const name of ignored) {
    const encoded = encodeQueryValue(name);
    if (named.length < MAX_IGNORED_NAMED && encoded.length <= MAX_IGNORED_NAME) named.push(encoded);
    else more++;
  }
  if (more > 0) named.push(`(${more} more)`);
  return `${named.join(", ")}; declared: ${declared.length === 0 ? "(none)" : declared.join(", ")}`;
}

/** The folder a field name or value is written under, as src/tree/layout.rs `folder_name` names it. */
function folderName(text) {
  if (text === "") return "_";
  let out = "";
  for (const b of new TextEncoder().encode(text)) {
    const keep = (b >= 97 && b <= 122) || (b >= 48 && b <= 57) || b === 45;
    out += keep ? String.fromCharCode(b) : `_${b.toString(16).padStart(2, "0")}`;
  }
  return out;
}

/**
 * `page` of the records of the list of `segment` that match `q` (a name or localized name
 * containing it, folded; `null`: any) and every condition (`[field index, value]`), as gen serve
 * answers it (src/serve/list.rs `narrowed`): one condition alone, with a value the tree holds, is that
 * value's list; anything else is rendered with query links.
 */
async function narrowedPage(facts, origin, segment, q, conditions, page) {
  const declared = facts.filters[segment] ?? [];
  const folderOf = ([field, value]) => `${segment}/_filters/${folderName(declared[field])}/${folderName(value)}`;
  const tailOf = (list) => list.map(([field, value]) => `&${encodeQueryValue(declared[field])}=${encodeQueryValue(value)}`).join("");
  if (q === null && conditions.length === 1) {
    const first = await origin.get(listFile(folderOf(conditions[0]), ""));
    if (first !== null) {
      const count = BigInt(JSON.parse(new TextDecoder().decode(first)).count);
      if (page.offset === 0n && page.limit === BigInt(facts.default_limit) && count > page.limit) return first;
      return listPage(facts, origin, segment, count, page, folderOf(conditions[0]), tailOf(conditions));
    }
  }
  // a tree built before names documents: no search, as gen serve answers it (404)
  if (q !== null && !facts.searchable.includes(segment)) return null;
  const sets = [];
  for (const condition of conditions) {
    const path = listFile(folderOf(condition), "_pages/all/");
    const all = await origin.get(path);
    if (all !== null) checkPage(all, path, pageCount(all), pageCount(all));
    sets.push(new Set(all === null ? [] : entriesOf(all)));
    // a value no record takes: nothing matches, and no other list needs reading
    if (all === null) break;
  }
  let found;
  if (sets.some((set) => set.size === 0)) {
    found = [];
  } else if (q === null) {
    found = [...sets[0]].filter((entry) => sets.every((set) => set.has(entry)));
  } else {
    const allBytes = await mustGet(origin, listFile(segment, "_pages/all/"));
    const all = entriesOf(allBytes);
    const stamp = { count: all.length, sha256: await sha256Hex(allBytes) };
    const positions = await matchingNames(origin, segment, fold(q), stamp);
    if (positions === null) return { status: 503, error: namesOutOfStep(segment) };
    found = positions.map((i) => all[i]).filter((entry) => sets.every((set) => set.has(entry)));
  }
  const total = BigInt(found.length);
  const start = min(page.offset, total);
  const end = min(min(page.offset + page.limit, MAX_U64), total);
  const shown = found.slice(Number(start), Number(end));
  const url = `${facts.base_url}/api/v2/${segment}/`;
  const search = q === null ? "" : `&q=${encodeQueryValue(q)}`;
  const link = (p) => (p === null ? null : `${url}?offset=${p.offset}&limit=${p.limit}${search}${tailOf(conditions)}`);
  return new TextEncoder().encode(renderPage(total, link(nextPage(page, total)), link(previousPage(page)), shown, facts.pretty));
}

/**
 * The list positions of the entries of the names document of `segment` whose keys contain
 * `folded` (a folded `q`), in order; `null` when it does not belong to the list `stamp` names
 * (its count and the SHA-256 of its `_pages/all` file: a publish stopped between the two). One
 * read, or for a split one (more than 50,000 records, src/search.rs) one more per shard, one
 * after the other: each file is matched line by line (one entry per line), holding one shard's
 * bytes and one entry at a time.
 */
async function matchingNames(origin, segment, folded, stamp) {
  const found = [];
  const read = async (rest, offset, count, shard) => {
    const bytes = await mustGet(origin, listFile(segment, rest));
    const decoder = new TextDecoder();
    let end = bytes.indexOf(10);
    const line = decoder.decode(end < 0 ? bytes : bytes.subarray(0, end));
    let head;
    try {
      head = JSON.parse(end < 0 ? line : `${line.replace(/,"results":\[$/, "")}}`);
    } catch {
      return null;
    }
    const sameList = head.list?.count === stamp.count && head.list?.sha256 === stamp.sha256;
    if (!sameList || head.count !== count || head.offset !== (shard ? offset : undefined)) return null;
    if (end < 0) return shard || !Array.isArray(head.shards) ? null : head;
    let seen = 0;
    let closed = false;
    for (let start = end + 1; start < bytes.length; start = end + 1) {
      end = bytes.indexOf(10, start);
      if (end < 0) end = bytes.length;
      let text = decoder.decode(bytes.subarray(start, end));
      if (text === "]}" && end === bytes.length) {
        closed = true;
        break;
      }
      if (text.endsWith(",")) text = text.slice(0, -1);
      let entry;
      try {
        entry = JSON.parse(text);
      } catch {
        return null;
      }
      if (!Array.isArray(entry.keys)) return null;
      if (entry.keys.some((key) => key.includes(folded))) found.push(offset + seen);
      seen++;
    }
    return closed && seen === count ? head : null;
  };
  const doc = await read("_names/", 0, stamp.count, false);
  if (doc === null) return null;
  if (doc.shards === undefined) return found;
  let offset = 0;
  for (let k = 0; k < doc.shards.length; k++) {
    const { count } = doc.shards[k];
    if (doc.shards[k].offset !== offset || (await read(`_names/${k}/`, offset, count, true)) === null) return null;
    offset += count;
  }
  return offset === stamp.count ? found : null;
}

/** The SHA-256 of `bytes`, lower-case hex (src/search.rs `sha256_hex`). */
async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}
