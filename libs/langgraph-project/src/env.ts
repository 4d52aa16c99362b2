/**
 * The project's environment (`env` in `langgraph.json`): a dotenv file or an inline object.
 * Values are returned, never written into `process.env`; the caller decides what to do with them.
 */
import { readFileSync } from 'node:fs';
import { ProjectConfigError } from './errors.js';
import type { ProjectConfig } from './config.js';

const LINE = /^\s*(?:export\s+)?([A-Za-z_][\w.-]*)\s*=\s*(.*)$/;

function unescapeDoubleQuoted(value: string): string {
  return value.replace(/\\([nrt"\\$`])/g, (_, c: string) => ({ n: '\n', r: '\r', t: '\t' })[c] ?? c);
}

/**
 * Parses dotenv text the way the `dotenv` package does for the common cases:
 * `KEY=value`, `export KEY=value`, blank lines, `#` comment lines, `#` comments after unquoted
 * values (an unquoted value ends at its first `#`), `'single'` (literal), `"double"` (with `\n \r \t \" \\` escapes; may span lines) and
 * `` `backtick` `` quoted values. Lines that are not assignments are ignored, like dotenv does.
 * No `${VAR}` expansion. A later assignment of a key wins.
 */
export function parseDotenv(text: string): Record<string, string> {
  const result: Record<string, string> = {};
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const match = LINE.exec(lines[i]!);
    if (!match) continue;
    const key = match[1]!;
    let rest = match[2]!;
    const quote = rest[0];
    if (quote === '"' || quote === "'" || quote === '`') {
      // Find the closing quote, continuing onto later lines for multi-line values.
      let body = rest.slice(1);
      let end = findClosingQuote(body, quote);
      let j = i;
      while (end === -1 && j + 1 < lines.length) {
        j += 1;
        body += `\n${lines[j]!}`;
        end = findClosingQuote(body, quote);
      }
      if (end === -1) {
        // Unterminated quote: dotenv keeps the line's text as written.
        result[key] = rest.trim();
        continue;
      }
      i = j;
      const value = body.slice(0, end);
      result[key] = quote === '"' ? unescapeDoubleQuoted(value) : value;
      continue;
    }
    // As in `dotenv`, an unquoted value ends at the first `#`.
    const comment = rest.indexOf('#');
    if (comment !== -1) rest = rest.slice(0, comment);
    result[key] = rest.trim();
  }
  return result;
}

function findClosingQuote(body: string, quote: string): number {
  for (let k = 0; k < body.length; k += 1) {
    if (body[k] === '\\' && quote === '"') {
      k += 1;
      continue;
    }
    if (body[k] === quote) return k;
  }
  return -1;
}

/**
 * The project's environment variables: the parsed env file when `env` is a path (relative to
 * `langgraph.json`), the object itself when `env` is an object (values stringified), `{}` when
 * `env` is absent.
 * @param options.missingFileOk - return `{}` instead of throwing when the env file does not
 *   exist (a deployed project usually gets its variables as secrets, not as a file).
 * @throws ProjectConfigError naming the `env` key when the file is missing or unreadable.
 */
export function loadProjectEnv(
  config: Pick<ProjectConfig, 'configPath' | 'json' | 'envFile'>,
  options: { missingFileOk?: boolean } = {},
): Record<string, string> {
  const env = config.json.env;
  if (env === undefined) return {};
  if (typeof env !== 'string') return { ...env };
  const file = config.envFile!;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options.missingFileOk) return {};
    const problem = code === 'ENOENT' ? `env file not found: ${env} (resolved to ${file})` : `cannot read env file ${file} (${code ?? String(error)})`;
    throw new ProjectConfigError(config.configPath, 'env', problem, { cause: error });
  }
  return parseDotenv(text);
}
