/**
 * One `berth deploy --json` in a project folder, timed: resolves with its wall time in seconds and
 * its result event (`deployment_url`…), rejects with its output when it did not succeed.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';

export function timedDeploy(berthBin, cwd, env) {
  return new Promise((done, fail) => {
    const started = performance.now();
    const child = spawn(process.execPath, [berthBin, 'deploy', '--json'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => {
      const seconds = (performance.now() - started) / 1000;
      const events = out.split('\n').filter(Boolean).map((line) => {
        try {
          return JSON.parse(line);
        } catch {
          return { type: 'text', line };
        }
      });
      const result = events.find((e) => e.type === 'result');
      if (code !== 0 || result?.status !== 'succeeded') fail(new Error(`berth deploy failed (exit ${code}):\n${out}\n${err}`));
      else done({ seconds, result });
    });
  });
}
