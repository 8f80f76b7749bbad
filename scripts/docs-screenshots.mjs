#!/usr/bin/env node
// Copies the dashboard screenshots the browser tests wrote to test-results/ into docs/images/
// (the pictures docs/dashboard.md and README.md show). Run the browser tests first:
//   npm test -- test/browser && node scripts/docs-screenshots.mjs
// Fails, naming the file and the test that writes it, when a screenshot is missing.
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** docs/images/<image> ← test-results/<from> (written by test/browser/<test>). */
const SCREENSHOTS = JSON.parse(readFileSync(join(root, "scripts/docs-screenshots.json"), "utf8"));

const missing = SCREENSHOTS.filter(({ from: src }) => !existsSync(join(root, "test-results", src)));
if (missing.length > 0) {
  for (const { from: src, test } of missing)
    console.error(`[docs-screenshots] test-results/${src} is missing: run test/browser/${test}`);
  process.exit(1);
}
mkdirSync(join(root, "docs/images"), { recursive: true });
for (const { image: name, from: src } of SCREENSHOTS) {
  copyFileSync(join(root, "test-results", src), join(root, "docs/images", name));
  const kb = Math.round(statSync(join(root, "docs/images", name)).size / 1024);
  console.log(`[docs-screenshots] docs/images/${name} ← test-results/${src} (${kb} KB)`);
}
