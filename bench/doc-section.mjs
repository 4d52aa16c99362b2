/**
 * Writes a benchmark's section of docs/benchmarks.md: replaces what lies between its markers
 * (`begin` … `end`, both part of `section`), or appends it when the document has none yet.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const BENCHMARKS_DOC = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));

export function writeSection(section, begin, end) {
  let doc = readFileSync(BENCHMARKS_DOC, 'utf8');
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  doc = from >= 0 && to > from ? doc.slice(0, from) + section + doc.slice(to + end.length) : `${doc.trimEnd()}\n\n${section}\n`;
  writeFileSync(BENCHMARKS_DOC, doc);
}
