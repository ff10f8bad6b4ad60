// Checks the rule vectors (tests/vectors/*.json) against the edge handler's and the CloudFront
// Function's own functions, as `gen config node` and `gen config cloudfront` print them for a
// tree (its facts: default limit 20, query links). Run by tests/suite/edge.rs:
//   node vectors.mjs HANDLER.mjs FUNCTION.js VECTORS_DIR LIST_HANDLER.mjs LIST_TREE
// LIST_HANDLER.mjs is `gen config node` for the tree LIST_TREE, built from list.json's data
// folder; its list answers (`listAnswer`, `notFound`, `badParam`) read that tree from its folder.
// The handler module is imported from a copy that exports its functions; the CloudFront Function
// runs in a vm context, as tests/tools/cloudfront-run.mjs runs it. Prints each case on which a
// function disagrees with its table, then how many agreed; exits 1 on any disagreement.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import vm from "node:vm";

const [handlerPath, functionPath, dir, listHandlerPath, listTree] = process.argv.slice(2);
const exported = `${handlerPath}.vectors.mjs`;
const names = "FACTS, route, badParam, nextLinked, previousPage, holds, folderName, debugEscape, fold, ignoredParams, ignoredHeader";
writeFileSync(exported, `${readFileSync(handlerPath, "utf8")}\nexport { ${names} };\n`);
const h = await import(pathToFileURL(exported).href);
const cf = vm.createContext({});
vm.runInContext(readFileSync(functionPath, "utf8"), cf);

const cases = (name) => JSON.parse(readFileSync(join(dir, name), "utf8")).cases;
/** JSON with object keys sorted, so that two values compare as text. */
const canonical = (value) =>
  JSON.stringify(value, (_, v) =>
    v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
const written = (page) => (page === null ? null : `${page.offset}/${page.limit}`);
let agreed = 0;
let disagreed = 0;
function check(who, want, got) {
  if (canonical(want) === canonical(got)) {
    agreed++;
  } else {
    disagreed++;
    console.log(`${who} disagrees:\n  table: ${canonical(want)}\n  got:   ${canonical(got)}`);
  }
}

// target -> route, page, q, conditions, or the 400
for (const c of cases("route.json")) {
  const { target } = c;
  const { route, query } = h.route(h.FACTS, target);
  let got;
  if (route.kind === "none") got = { target, none: true };
  else if (route.kind === "doc") got = { target, doc: route.key };
  else if (query.page.bad) {
    const body = JSON.parse(h.badParam(h.FACTS, query.page.bad));
    const error = { status: 400, parameter: body.parameter, value: body.value, detail: body.detail };
    if (c.error?.detail === undefined) delete error.detail;
    got = { target, list: route.segment, error };
  } else {
    got = { target, list: route.segment, page: written(query.page), q: query.q, conditions: query.conditions };
  }
  check(`handler.js route(${JSON.stringify(target)})`, c, got);
  // the CloudFront Function gets the path and the query apart, and reads only the page
  const question = target.indexOf("?");
  const uri = question < 0 ? target : target.slice(0, question);
  if (!uri.startsWith("/")) continue; // CloudFront hands it an origin-form path only
  const key = cf.normalize(uri);
  if (key === null || c.none) {
    check(`cloudfront.js normalize(${JSON.stringify(uri)})`, c.none === true, key === null);
    continue;
  }
  if (c.doc !== undefined) {
    check(`cloudfront.js normalize(${JSON.stringify(uri)})`, c.doc, key);
    continue;
  }
  const querystring = {};
  for (const pair of (question < 0 ? "" : target.slice(question + 1)).split("&")) {
    if (pair === "") continue;
    const equals = pair.indexOf("=");
    const name = equals < 0 ? pair : pair.slice(0, equals);
    const value = equals < 0 ? "" : pair.slice(equals + 1);
    const entry = querystring[name];
    if (entry) (entry.multiValue = entry.multiValue ?? [{ value: entry.value }]).push({ value });
    else querystring[name] = { value };
  }
  const page = cf.pageQuery(querystring);
  const want = c.error ? { bad: { name: c.error.parameter, value: c.error.value } } : c.page;
  check(`cloudfront.js pageQuery(${JSON.stringify(target)})`, want, page.bad ? { bad: page.bad } : `${page.offsetText}/${page.limitText}`);
}

// count, page and style -> next, previous, and the file held
for (const c of cases("paging.json")) {
  const [offset, limit] = c.page.split("/").map(BigInt);
  const page = { offset, limit };
  const count = BigInt(c.count);
  const facts = { page_sizes: c.sizes, links: c.style };
  const file = offset === 0n && limit >= count ? "_pages/all/" : h.holds(facts, count, page) ? `_pages/${limit}/${offset}/` : null;
  const got = { ...c, next: written(h.nextLinked(page, count, c.style)), previous: written(h.previousPage(page)), file };
  check(`handler.js paging ${canonical(c)}`, c, got);
  // the CloudFront Function's numbers are exact up to 2^53: the cases within
  if (c.page.length > 15) continue;
  cf.FACTS = { ...cf.FACTS, page_sizes: c.sizes, links: c.style };
  const held = cf.pageFile(c.count, { offset: Number(offset), limit: Number(limit) });
  check(`cloudfront.js pageFile ${canonical(c)}`, c.file, held);
}

// text -> folder name, escape, case fold
for (const c of cases("text.json")) {
  const got = { text: c.text, folder: h.folderName(c.text), escape: h.debugEscape(h.FACTS, c.text), fold: h.fold(c.text) };
  check(`handler.js text ${JSON.stringify(c.text)}`, c, got);
}

// target and declared filters -> the parameters ignored, and the Gen-Ignored header's value
for (const c of cases("ignored.json")) {
  const { query } = h.route(h.FACTS, c.target);
  const ignored = h.ignoredParams(c.declared, query.params);
  const got = { target: c.target, declared: c.declared, ignored, header: h.ignoredHeader(c.declared, ignored) };
  check(`handler.js ignored ${JSON.stringify(c.target)}`, c, got);
}

// target -> the list answer over list.json's tree: count, entry ids, next, previous, or the
// 400 or 404 body; as the handler answers it: `find` (which calls `listAnswer`), then `notFound`
// for a target it finds nothing for
const listExported = `${listHandlerPath}.vectors.mjs`;
const listNames = "FACTS, find, stripOrigin, notFound, treeOrigin, originFor, nodeFiles";
writeFileSync(listExported, `${readFileSync(listHandlerPath, "utf8")}\nexport { ${listNames} };\n`);
const l = await import(pathToFileURL(listExported).href);
// the tree's folder, or an archive of it (the handler printed for the archive reads it by ranges)
const origin = l.treeOrigin(l.FACTS, l.originFor(l.FACTS, listTree, l.nodeFiles));
for (const c of cases("list.json")) {
  const { target } = c;
  const answer = await l.find(l.FACTS, origin, l.stripOrigin(target));
  let got;
  if (answer === null) got = { target, status: 404, body: JSON.parse(l.notFound(l.FACTS, target)) };
  else if (answer.error !== undefined) got = { target, status: answer.status, body: JSON.parse(answer.error) };
  else if (answer.list === undefined) got = { target, status: 200, document: true };
  else {
    const page = JSON.parse(new TextDecoder().decode(answer.list));
    const ids = page.results.map((entry) => Number(entry.url.replace(/\/$/, "").split("/").pop()));
    got = { target, status: 200, count: page.count, ids, next: page.next, previous: page.previous };
  }
  check(`handler.js list ${JSON.stringify(target)}`, c, got);
}

console.log(`${agreed} checks agree, ${disagreed} disagree`);
process.exit(disagreed === 0 ? 0 : 1);
