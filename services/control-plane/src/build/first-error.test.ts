/**
 * The cause a failed install's status message names, from the output of each package manager
 * (outputs as those tools print them; the npm case runs the real npm in project-builder.test).
 */
import { describe, expect, it } from '@jest/globals';
import { FirstErrorFinder } from './first-error.js';

function causeOf(output: string): string | undefined {
  const finder = new FirstErrorFinder();
  for (const line of output.split('\n')) finder.add(line);
  return finder.cause;
}

describe('FirstErrorFinder', () => {
  it('keeps npm’s explanation and drops codes, the usage text and the log pointer', () => {
    const output = [
      'npm warn deprecated inflight@1.0.6: This module is not supported',
      'npm error code ERESOLVE',
      'npm error ERESOLVE unable to resolve dependency tree',
      'npm error',
      'npm error Found: react@17.0.2',
      'npm error',
      'npm error Clean install a project',
      'npm error',
      'npm error Usage:',
      'npm error npm ci',
      'npm error A complete log of this run can be found in: /root/.npm/_logs/x.log',
    ].join('\n');
    expect(causeOf(output)).toBe('ERESOLVE unable to resolve dependency tree — Found: react@17.0.2');
  });

  it('reads old npm’s ERR! prefix and ignores colour codes', () => {
    expect(
      causeOf(
        'npm ERR! code E404\nnpm ERR! \u001b[31m404 Not Found - GET https://registry.npmjs.org/nope\u001b[0m\nnpm ERR! A complete log of this run can be found in:',
      ),
    ).toBe('404 Not Found - GET https://registry.npmjs.org/nope');
  });

  it('only reads the first npm error block', () => {
    expect(causeOf('npm error first cause\n> postinstall\nnpm error later noise')).toBe('first cause');
  });

  it('finds the error line of yarn, pnpm, bun, tsc and node', () => {
    expect(
      causeOf(
        'yarn install v1.22.22\n[1/4] Resolving packages...\nerror Your lockfile needs to be updated, but yarn was run with `--frozen-lockfile`.\ninfo Visit https://yarnpkg.com',
      ),
    ).toBe('error Your lockfile needs to be updated, but yarn was run with `--frozen-lockfile`.');
    expect(causeOf(' ERR_PNPM_OUTDATED_LOCKFILE  Cannot install with "frozen-lockfile" because pnpm-lock.yaml is not up to date')).toMatch(
      /^ERR_PNPM_OUTDATED_LOCKFILE {2}Cannot install/,
    );
    expect(causeOf('bun install v1.1\nerror: lockfile had changes, but lockfile is frozen')).toBe('error: lockfile had changes, but lockfile is frozen');
    expect(causeOf('> tsc\nsrc/graph.ts(3,7): error TS2322: Type string is not assignable to type number.')).toMatch(/error TS2322/);
    expect(causeOf("node:internal/modules\n  throw err;\nError: Cannot find module 'x'")).toBe("Error: Cannot find module 'x'");
  });

  it('says nothing when the output has no error line, and shortens a long cause', () => {
    expect(causeOf('added 3 packages\nKilled')).toBeUndefined();
    expect(causeOf(`npm error ${'x'.repeat(2000)}`)!.length).toBe(500);
  });
});
