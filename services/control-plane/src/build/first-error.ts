/**
 * The first real error in an installer's output. A failed `npm ci` ends with a long usage text
 * (EUSAGE) or a pointer to a debug log, and the cause — `Missing: date-fns@4.1.0 from lock file`,
 * `ERESOLVE could not resolve` — scrolls by earlier. The build's status message names this
 * cause instead of the last lines.
 */

/** npm's error prefix (`npm error` since npm 10, `npm ERR!` before). */
const NPM_ERROR = /^npm (?:error|ERR!)(?: (.*))?$/;
/** Lines that start an error of another tool: yarn 1 and bun (`error …`), pnpm, tsc, node. */
const OTHER_ERROR = [/^error:?\s+\S/i, /\bERR_PNPM_[A-Z_]+\b/, /\berror TS\d+:/, /^(?:\w+)?Error(?: \[[A-Z_]+\])?: \S/];
/** npm lines that are bookkeeping, not the cause. */
const NPM_NOISE = [/^(?:code|errno|syscall|path|dest|signal|command|cwd) \S/, /^A complete log of this run can be found in/, /^Log files were not written/];
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;

/** At most this many characters of the cause go into a status message. */
const MAX_LENGTH = 500;

/** Feed it every output line; `cause` is the first error it saw, as one line. */
export class FirstErrorFinder {
  /** Paragraphs of the first npm error block (each a list of lines). */
  #npm: string[][] | undefined;
  #npmOpen = false;
  #other: string | undefined;

  add(raw: string): void {
    const line = raw.replace(ANSI, '').trimEnd();
    const npm = NPM_ERROR.exec(line);
    if (npm) {
      if (!this.#npm) {
        this.#npm = [[]];
        this.#npmOpen = true;
      }
      if (this.#npmOpen) this.#npmLine((npm[1] ?? '').trim());
      return;
    }
    // The first npm error block ends at the first line that is not npm's.
    if (this.#npm) this.#npmOpen = false;
    if (this.#other === undefined && OTHER_ERROR.some((pattern) => pattern.test(line.trim()))) this.#other = line.trim();
  }

  #npmLine(text: string): void {
    const paragraphs = this.#npm!;
    if (text === 'Usage:') {
      // npm prints the command's one-line description right before its usage text.
      while (paragraphs.at(-1)?.length === 0) paragraphs.pop();
      paragraphs.pop();
      this.#npmOpen = false;
      return;
    }
    if (!text) {
      if (paragraphs.at(-1)!.length > 0) paragraphs.push([]);
      return;
    }
    if (!NPM_NOISE.some((pattern) => pattern.test(text))) paragraphs.at(-1)!.push(text);
  }

  /** The first error, or `undefined` when the output had none that looks like one. */
  get cause(): string | undefined {
    const npm = this.#npm?.filter((paragraph) => paragraph.length > 0).map((paragraph) => paragraph.join(' '));
    const found = npm?.length ? npm.join(' — ') : this.#other;
    if (!found) return undefined;
    return found.length > MAX_LENGTH ? `${found.slice(0, MAX_LENGTH - 1)}…` : found;
  }
}
