/**
 * docs/reference/settings.md: every environment variable a Berth process reads, taken from the zod
 * schemas of each `src/env.ts` (the only readers of process.env). The schemas' documentation is their
 * TSDoc, which exists only in the source, so the source is read: each `z.object({...})` literal is
 * split into its entries, each entry's comment, default and choices are kept.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The env files, in the order the page lists them, and what runs with each schema they declare. */
export const SETTINGS_SOURCES: { file: string; title: string; schemas?: Record<string, string>; intro: string }[] = [
  {
    file: 'cli/src/env.ts',
    title: '`berth` (the CLI, `berth up`, `berth dev`)',
    intro: 'Read by every `berth` command. `make up` passes the environment on to the services it runs, so the service settings below apply to it too.',
  },
  {
    file: 'libs/config/src/index.ts',
    title: 'Every gRPC service (control-plane, sandbox-manager, export-worker), and tracing in every service',
    schemas: {
      grpcServerEnv: 'Where each internal service listens',
      tracingEnv: "The platform's own tracing (every service and `berth up`; [monitor](../operate/monitor.md#tracing-the-platform))",
    },
    intro: 'Where each internal service listens (`berth up` sets these itself: loopback ports, a fresh token), and where every service sends its spans.',
  },
  { file: 'services/gateway/src/env.ts', title: 'gateway', intro: 'The public HTTP API (`berth serve --service gateway`).' },
  {
    file: 'services/control-plane/src/env.ts',
    title: 'control-plane',
    intro: 'Login flows, deployments, builds and the deployers (`berth serve --service control-plane`).',
  },
  {
    file: 'services/export-worker/src/env.ts',
    title: 'export-worker',
    intro:
      'Traces and bulk exports (`berth serve --service export-worker`). The defaults of the `BULK_EXPORT_*` settings left empty here are given in [bulk exports](../guides/exports.md).',
  },
  {
    file: 'services/sandbox-manager/src/env.ts',
    title: 'sandbox-manager',
    schemas: { limitsSchema: 'Limits and quotas (also read by `berth up`)', schema: 'The service' },
    intro:
      'Sandboxes (`berth serve --service sandbox-manager`). Quantities are written as Kubernetes writes them (`500m`, `2`, `512Mi`); the defaults of the limits and quotas are in [sandboxes](../guides/sandboxes.md).',
  },
  {
    file: 'services/agent-runtime/src/env.ts',
    title: 'agent server of a deployed revision',
    schemas: { serveSchema: 'The agent server', fetchArtifactSchema: 'Fetching a revision (the init container of an agent pod)' },
    intro: 'Set by the deployers for each revision they start; listed for operators reading a pod or a process.',
  },
];

export interface Setting {
  name: string;
  description: string;
  default?: string;
  choices?: string[];
}

const OPEN: Record<string, string> = { '(': ')', '[': ']', '{': '}' };

/** A `/` here starts a regex literal (not a division): what precedes it cannot end an operand. */
const regexAt = (source: string, i: number) => source[i] === '/' && /(^|[(,:=|&!?])\s*$/.test(source.slice(Math.max(0, i - 20), i));

/**
 * Index just past the token at `i` when it is a string, template literal, comment, regex literal or
 * bracketed group (its nested tokens skipped the same way); otherwise `i + 1`.
 */
function skip(source: string, i: number): number {
  const c = source[i]!;
  if (c === '/' && source[i + 1] === '/') return source.indexOf('\n', i) + 1 || source.length;
  if (c === '/' && source[i + 1] === '*') return source.indexOf('*/', i) + 2;
  if (c === "'" || c === '"' || c === '`' || regexAt(source, i)) {
    let inClass = false;
    for (let j = i + 1; j < source.length; j++) {
      if (source[j] === '\\') j++;
      else if (c === '/' && source[j] === '[') inClass = true;
      else if (c === '/' && source[j] === ']') inClass = false;
      else if (source[j] === c && !inClass) return j + 1;
    }
    throw new Error(`unterminated literal at ${i}`);
  }
  const close = OPEN[c];
  if (!close) return i + 1;
  for (let j = i + 1; j < source.length;) {
    if (source[j] === close) return j + 1;
    j = skip(source, j);
  }
  throw new Error(`unbalanced ${c} at ${i}`);
}

/** Splits an object literal's body at its top-level commas. */
function topLevelEntries(body: string): string[] {
  const entries: string[] = [];
  let start = 0;
  for (let i = 0; i < body.length;) {
    if (body[i] === ',') {
      entries.push(body.slice(start, i));
      start = i + 1;
    }
    i = skip(body, i);
  }
  entries.push(body.slice(start));
  return entries.filter((e) => e.trim());
}

function commentText(comment: string): string {
  return comment
    .replace(/^\/\*\*?|\*\/$/g, '')
    .split('\n')
    .map((line) => line.replace(/^\s*\*\s?/, '').trim())
    .filter(Boolean)
    .join(' ');
}

function parseEntry(entry: string): Setting | undefined {
  const match = /^\s*((?:\/\*[\s\S]*?\*\/\s*|\/\/[^\n]*\n\s*)*)([A-Z][A-Z0-9_]*)\s*:\s*([\s\S]*)$/.exec(entry);
  if (!match) return undefined;
  const [, comments = '', name = '', expression = ''] = match;
  const docs = [...comments.matchAll(/\/\*\*([\s\S]*?)\*\//g)].map((m) => commentText(m[0]));
  const setting: Setting = { name, description: docs.join(' ') };
  const at = expression.lastIndexOf('.default(');
  if (at >= 0) {
    const open = at + '.default'.length;
    setting.default = expression
      .slice(open + 1, skip(expression, open) - 1)
      .trim()
      .replace(/^'(.*)'$/, '$1');
  }
  const choices = /z\.enum\(\[([^\]]*)\]\)/.exec(expression);
  if (choices) setting.choices = [...choices[1]!.matchAll(/'([^']*)'/g)].map((m) => m[1]!);
  return setting;
}

/** Each `const NAME = z.object({...})` (or `z\n.object`) of a source file and its settings. */
export function schemasIn(source: string): { name: string; description: string; settings: Setting[] }[] {
  const found: { name: string; description: string; settings: Setting[] }[] = [];
  for (const match of source.matchAll(/(\/\*\*(?:(?!\*\/)[\s\S])*\*\/\s*)?const (\w+) = z\s*\.object\(\{/g)) {
    const open = match.index + match[0].length - 1;
    const body = source.slice(open + 1, skip(source, open) - 1);
    found.push({
      name: match[2]!,
      description: match[1] ? commentText(match[1].trim()) : '',
      settings: topLevelEntries(body).flatMap((e) => parseEntry(e) ?? []),
    });
  }
  return found;
}

/** Variables several schemas read without a comment of their own, meaning the same everywhere. */
const COMMON: Record<string, string> = {
  DATABASE_URL: 'The Postgres to use (`postgres://user:password@host:5432/db`).',
  REDIS_URL: 'Redis for queues and run events (`redis://…`); unset: Postgres.',
  LOG_LEVEL: 'pino log level.',
  GRPC_HOST: 'Interface the gRPC server listens on.',
  GRPC_PORT: 'gRPC port; 0 picks a free one.',
  HOME: 'Home folder of builds and agent servers started by this process.',
  PATH: 'Search path of builds started by this process.',
};

const cell = (text: string) => text.replace(/\|/g, '\\|');

export function settingsPage(root: string): string {
  const sections = SETTINGS_SOURCES.map((source) => ({ ...source, schemas: schemasIn(readFileSync(join(root, source.file), 'utf8')), titles: source.schemas }));
  const lines = [
    '# Settings',
    '',
    "<!-- Generated by `make docs` (cli/src/docs) from each service's src/env.ts; do not edit. -->",
    '',
    'Every Berth process reads its settings from its environment, through one zod schema per service',
    '(its `src/env.ts`, the only code that reads `process.env`); a value that does not match is refused at',
    'start with one line per bad variable. `make up` runs every service in one process, so',
    '`BULK_EXPORT_FILE_ROWS=100000 make up` applies as it would to that service alone; what the platform',
    'provides for itself (its Postgres, its key `.berth/secret-key`, its internal token and gRPC ports) is',
    'fixed. On Kubernetes the chart sets them from its values ([Helm values](helm-values.md)).',
    '',
  ];
  for (const section of sections) {
    lines.push(`## ${section.title}`, '', `${section.intro} Source: \`${section.file}\`.`, '');
    for (const schema of section.schemas) {
      if (section.schemas.length > 1) lines.push(`### ${section.titles?.[schema.name] ?? schema.name}`, '');
      if (schema.description) lines.push(schema.description, '');
      lines.push('| Variable | Default | What |', '|---|---|---|');
      for (const s of schema.settings) {
        const description = s.description || COMMON[s.name] || '';
        const choices = s.choices ? ` One of ${s.choices.map((c) => `\`${c}\``).join(', ')}.` : '';
        lines.push(`| \`${s.name}\` | ${s.default !== undefined ? `\`${cell(s.default)}\`` : ''} | ${cell(description + choices).trim()} |`);
      }
      lines.push('');
    }
  }
  return lines.join('\n');
}
