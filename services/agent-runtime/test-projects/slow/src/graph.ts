/**
 * A node that waits `delay_ms` (from the context, else `configurable.delay_ms`, default 1000)
 * and honours the run's abort signal. It
 * writes `custom` stream events: `{ phase: "start", delay_ms }` before and `{ phase: "done" }`
 * after the wait (stream mode `custom`).
 */
import { Annotation, StateGraph, type LangGraphRunnableConfig } from '@langchain/langgraph';
import { z } from 'zod';

const State = Annotation.Root({
  waited_ms: Annotation<number>,
});

export const SlowContext = z.object({ delay_ms: z.number().int().nonnegative().optional() });

/** Waits `ms`, or rejects when `signal` aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new Error('aborted'));
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

async function wait(_state: typeof State.State, config: LangGraphRunnableConfig<z.infer<typeof SlowContext>>) {
  const delay = config.context?.delay_ms ?? Number(config.configurable?.delay_ms ?? 1000);
  config.writer?.({ phase: 'start', delay_ms: delay });
  const started = Date.now();
  await sleep(delay, config.signal);
  config.writer?.({ phase: 'done' });
  return { waited_ms: Date.now() - started };
}

export const graph = new StateGraph(State, { context: SlowContext })
  .addNode('wait', wait)
  .addEdge('__start__', 'wait')
  .addEdge('wait', '__end__')
  .compile();
