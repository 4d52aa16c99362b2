/**
 * One attempt of a job, as the worker hands it to BullMQ: the handler raced against its timeout,
 * its result checked for storability, and its error made recordable by both backends (and
 * marked non-retryable when retrying cannot help).
 */
import { UnrecoverableError } from 'bullmq';
import { InvalidJobResultError, JobTimeoutError } from './errors.js';
import { isUnstorable, jsonRoundTrip, storableText, unstorableIssues } from './portable.js';

const ORIGINAL = Symbol('berth.queue.original-error');

/**
 * Runs `run` and rejects with a `JobTimeoutError` (after aborting `controller` with it) when it
 * takes longer than `timeoutMs`. The handler is not stopped: it should honour its signal.
 */
export async function withTimeout<T>(
  run: Promise<T>,
  timeout: { ms: number | undefined; controller: AbortController; jobName: string; jobId: string },
): Promise<T> {
  const { ms, controller, jobName, jobId } = timeout;
  if (!ms) return run;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      run,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const err = new JobTimeoutError(jobName, jobId, ms);
          controller.abort(err);
          reject(err);
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The value BullMQ stores for a handler's result; throws (non-retryable) when it cannot be stored. */
export function storableResult(jobName: string, result: unknown): unknown {
  const json = jsonRoundTrip(result === undefined ? null : result);
  if (!json) throw recordable(new InvalidJobResultError(jobName, [{ loc: ['result'], msg: 'The result has no JSON form', type: 'json_invalid' }]), true);
  const issues = unstorableIssues(json.value, ['result']);
  if (issues.length > 0) throw recordable(new InvalidJobResultError(jobName, issues), true);
  return json.value;
}

/**
 * The error to hand BullMQ for `error`: the error itself when both backends can record it as it
 * is; otherwise a stand-in with the same name and a storable message and stack (U+0000 and
 * unpaired surrogates replaced), carrying the original for {@link originalError}. `permanent`
 * makes the stand-in a BullMQ `UnrecoverableError`, so the job fails without further attempts.
 */
export function recordable(error: unknown, permanent = false): Error {
  const err = error instanceof Error ? error : new Error(String(error));
  const stack = err.stack ?? '';
  if (!permanent && !isUnstorable(err.message) && !isUnstorable(stack)) return err;
  const standIn = permanent ? new UnrecoverableError(storableText(err.message)) : new Error(storableText(err.message));
  if (!permanent) standIn.name = err.name;
  standIn.stack = storableText(stack);
  Object.defineProperty(standIn, ORIGINAL, { value: err });
  return standIn;
}

/** The error a stand-in made by {@link recordable} stands for, or undefined for any other error. */
export function originalError(error: Error): Error | undefined {
  return (error as Error & { [ORIGINAL]?: Error })[ORIGINAL];
}
