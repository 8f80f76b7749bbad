#!/usr/bin/env node
// Claims tied to tests (docs/guarantees.md, "Claims and their tests"): every promise the docs
// make names a test that fails without it, and every such reference resolves.
//
//   node scripts/check-claims.mjs [--root DIR]
//
// Reads README.md and docs/*.md under DIR (default: the repository). A claim is
//   - in docs/failure-cases.md, each list item that starts `- **F<nn>`        (id F<nn>)
//   - in docs/guarantees.md, each row of "The promises" table `| G<n> | …`     (id G<n>)
//   - in docs/state-machine.md, each numbered item of "## Rules"              (id rule <n>)
//   - in any of these files, any other paragraph or list item with `Tests:`   (id file:line)
// A claim's references are the code spans after `Tests:` in its paragraph or list item (for a
// G-row: the code spans of every table row whose first cell names it, e.g. `| G1 G5 | …`).
// A reference is `test/<path>` or `bench/<path>` (a `*` may stand for part of the file name),
// optionally followed by ` > ` and the beginning of a test's title: `test/a.test.ts > rule 1:`.
// A claim is tied when it has at least one reference and every reference resolves: the file
// exists and, with a title, the file has an it/test/describe call whose title starts with it.
// Prints each problem, then `claims N, tied M`; exits 1 unless every claim is tied.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Splits Markdown into blocks (paragraphs, list items, table rows) outside fenced code. */
export function blocks(text) {
  const out = [];
  let cur = null;
  let fenced = false;
  let heading = "";
  const flush = () => {
    if (cur) out.push(cur);
    cur = null;
  };
  text.split("\n").forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) {
      flush();
      fenced = !fenced;
      return;
    }
    if (fenced) return;
    if (/^#{1,6} /.test(line)) {
      flush();
      heading = line.replace(/^#+ /, "").trim();
      return;
    }
    if (line.trim() === "") {
      flush();
      return;
    }
    const item = /^(- |\* |\d+\. )/.test(line);
    const row = line.startsWith("|");
    if (item || row || !cur || cur.kind === "row") {
      flush();
      cur = { kind: row ? "row" : item ? "item" : "para", line: i + 1, heading, text: line };
      return;
    }
    cur.text += ` ${line.trim()}`;
  });
  flush();
  return out;
}

/** Where `Tests:` starts in `text` outside code spans, or -1. */
function marker(text) {
  return text.replace(/`[^`]*`/g, (m) => " ".repeat(m.length)).indexOf("Tests:");
}

/** The code spans of `text` after its `Tests:` marker (all of them when `all`). */
function spans(text, all = false) {
  const at = all ? 0 : marker(text);
  if (at < 0) return [];
  return [...text.slice(at).matchAll(/`([^`]+)`/g)].map((m) => m[1].trim());
}

/** `test/…` or `bench/…` code spans, parsed into { path, title? }. */
function references(codeSpans) {
  return codeSpans
    .filter((s) => /^(test|bench)\/\S/.test(s))
    .map((s) => {
      const [path, ...rest] = s.split(" > ");
      const title = rest.join(" > ").trim();
      return title ? { path: path.trim(), title: title.replace(/^"(.*)"$/, "$1") } : { path };
    });
}

/** The claims of one document: { id, file, line, refs }. */
export function claimsOf(file, text) {
  const bs = blocks(text);
  const claims = [];
  const rowRefs = new Map();
  for (const b of bs) {
    if (file === "docs/guarantees.md" && b.kind === "row") {
      const first = b.text.split("|")[1]?.trim() ?? "";
      if (/^G\d+( G\d+)*$/.test(first)) {
        for (const g of first.split(" ")) {
          rowRefs.set(g, [...(rowRefs.get(g) ?? []), ...references(spans(b.text, true))]);
        }
        if (b.heading === "The promises")
          claims.push({ id: first, file, line: b.line, refs: null });
        continue;
      }
    }
    if (b.kind === "row") continue;
    let id = null;
    if (file === "docs/failure-cases.md" && b.kind === "item") {
      id = /^- \*\*(F\d+)/.exec(b.text)?.[1] ?? null;
    }
    if (file === "docs/state-machine.md" && b.kind === "item" && b.heading === "Rules") {
      const n = /^(\d+)\. /.exec(b.text)?.[1];
      if (n) id = `rule ${n}`;
    }
    if (!id && marker(b.text) >= 0) id = `${file}:${b.line}`;
    if (id) claims.push({ id, file, line: b.line, refs: references(spans(b.text)) });
  }
  for (const c of claims) if (c.refs === null) c.refs = rowRefs.get(c.id) ?? [];
  return claims;
}

/**
 * The titles of it/test/describe calls in a test file: the string literal each call starts with,
 * also after a modifier or a table (`it.skipIf(skip)("…"`, `it.each([…])("…"`).
 */
export function titles(source) {
  const out = [];
  const call = /(?:\b(?:it|test|describe|bench)(?:\.[\w$]+)*|\))\(\s*(["'`])/g;
  for (let m = call.exec(source); m; m = call.exec(source)) {
    const quote = m[1];
    let i = call.lastIndex;
    let title = "";
    while (i < source.length && source[i] !== quote) {
      if (source[i] === "\\") i++;
      title += source[i] ?? "";
      i++;
    }
    out.push(title);
  }
  return out;
}

/** The files a reference's path names (a `*` in the file name matches any run of characters). */
function resolve(root, path) {
  if (!path.includes("*")) {
    const full = join(root, path);
    return existsSync(full) && statSync(full).isFile() ? [path] : [];
  }
  const dir = dirname(path);
  if (!existsSync(join(root, dir))) return [];
  const escaped = basename(path).replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  const pattern = new RegExp(`^${escaped.replaceAll("*", ".*")}$`);
  return readdirSync(join(root, dir))
    .filter((f) => pattern.test(f))
    .map((f) => `${dir}/${f}`);
}

/** Checks every claim of README.md and docs/*.md under `root`. */
export function checkClaims(root) {
  const docs = ["README.md"];
  if (existsSync(join(root, "docs"))) {
    for (const f of readdirSync(join(root, "docs")).sort()) {
      if (f.endsWith(".md")) docs.push(`docs/${f}`);
    }
  }
  const claims = docs
    .filter((f) => existsSync(join(root, f)))
    .flatMap((f) => claimsOf(f, readFileSync(join(root, f), "utf8")));
  const problems = [];
  let tied = 0;
  for (const c of claims) {
    const where = `${c.file}:${c.line} ${c.id}`;
    const before = problems.length;
    if (c.refs.length === 0) {
      problems.push(`${where}: no test named (add "Tests: \`test/<file>\`")`);
    }
    for (const r of c.refs) {
      const files = resolve(root, r.path);
      if (files.length === 0) {
        problems.push(`${where}: ${r.path}: no such file`);
      } else if (r.title !== undefined) {
        const found = files.some((f) =>
          titles(readFileSync(join(root, f), "utf8")).some((t) => t.startsWith(r.title)),
        );
        if (!found) problems.push(`${where}: ${r.path}: no test titled "${r.title}…"`);
      }
    }
    if (problems.length === before) tied++;
  }
  return { claims: claims.length, tied, problems };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const at = process.argv.indexOf("--root");
  const root = at > 0 ? process.argv[at + 1] : join(dirname(fileURLToPath(import.meta.url)), "..");
  const { claims, tied, problems } = checkClaims(root);
  for (const p of problems) console.log(p);
  console.log(`claims ${claims}, tied ${tied}`);
  process.exitCode = tied === claims ? 0 : 1;
}
