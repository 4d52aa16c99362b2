/**
 * The docs stay true to the code: the generated reference pages are current (else `make docs`), and
 * every page under docs/ is reachable from README.md through links that resolve.
 */
import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { REPO_ROOT, generatedPages } from './pages.js';
import { schemasIn } from './settings.js';

describe('generated reference pages', () => {
  it.each(Object.entries(generatedPages()))('%s is current (run `make docs` after changing routes, commands, env.ts or the chart)', (path, text) => {
    expect(readFileSync(join(REPO_ROOT, path), 'utf8')).toBe(text);
  });

  it('lists a setting added to an env schema, with its comment, default and choices', () => {
    const source = `const schema = z.object({
      /** Where things go (see https://example.com/a/b). */
      NEW_SETTING: z.enum(['a', 'b']).default('b'),
      PATTERN: z.string().regex(/^[a-z_]{0,4}$/).default('x'),
    }).refine((e) => e.NEW_SETTING !== 'a', { message: 'no' });`;
    expect(schemasIn(source)).toEqual([
      {
        name: 'schema',
        description: '',
        settings: [
          { name: 'NEW_SETTING', description: 'Where things go (see https://example.com/a/b).', default: 'b', choices: ['a', 'b'] },
          { name: 'PATTERN', description: '', default: 'x' },
        ],
      },
    ]);
  });
});

const withoutCode = (text: string) => text.replace(/```[\s\S]*?```/g, '');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

function anchorsOf(page: string): Set<string> {
  return new Set([...withoutCode(readFileSync(join(REPO_ROOT, page), 'utf8')).matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));
}

/** Relative links of a Markdown page: the target's path from the repository root, and its anchor. */
function linksOf(page: string): { target: string; anchor: string | undefined }[] {
  return [...withoutCode(readFileSync(join(REPO_ROOT, page), 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((link) => !/^[a-z]+:/.test(link))
    .map((link) => {
      const [path = '', anchor] = link.split('#');
      return { target: path ? relative(REPO_ROOT, join(REPO_ROOT, dirname(page), path)) : page, anchor };
    });
}

function markdownUnder(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? markdownUnder(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
  );
}

describe('the docs tree', () => {
  const reached = new Set<string>();
  const broken: string[] = [];
  const visit = (page: string) => {
    if (reached.has(page)) return;
    reached.add(page);
    for (const { target, anchor } of linksOf(page)) {
      if (!existsSync(join(REPO_ROOT, target))) {
        broken.push(`${page} → ${target}`);
      } else if (target.endsWith('.md')) {
        if (anchor && !anchorsOf(target).has(anchor)) broken.push(`${page} → ${target}#${anchor}`);
        if (target.startsWith('docs/') || target === 'README.md') visit(target);
      }
    }
  };
  visit('README.md');

  it('links only to files and headings that exist', () => {
    expect(broken).toEqual([]);
  });

  it('reaches every page under docs/ from README.md', () => {
    expect(markdownUnder('docs').filter((page) => !reached.has(page))).toEqual([]);
  });

  it('keeps README.md under 200 lines', () => {
    expect(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8').split('\n').length).toBeLessThan(200);
  });
});
