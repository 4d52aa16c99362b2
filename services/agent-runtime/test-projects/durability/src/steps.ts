/**
 * Three nodes in a row (`one` → `two` → `three`). Each first appends `<tag> <node> <pid>` to the
 * file named by the input's `log` (outside Postgres, so it counts executions whatever happens to
 * the database), then waits `delay_ms` (default 0, honouring the abort signal) and adds its name
 * to `trail`. A run whose nodes each executed once leaves exactly three lines.
 */
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Annotation, StateGraph, type LangGraphRunnableConfig } from '@langchain/langgraph';

const State = Annotation.Root({
  tag: Annotation<string>,
  log: Annotation<string>,
  delay_ms: Annotation<number | undefined>,
  trail: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
  pids: Annotation<number[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});

function step(name: string) {
  return async (state: typeof State.State, config: LangGraphRunnableConfig) => {
    appendFileSync(state.log, `${state.tag} ${name} ${process.pid}\n`);
    await sleep(state.delay_ms ?? 0, undefined, { signal: config.signal });
    return { trail: [name], pids: [process.pid] };
  };
}

export const graph = new StateGraph(State)
  .addNode('one', step('one'))
  .addNode('two', step('two'))
  .addNode('three', step('three'))
  .addEdge('__start__', 'one')
  .addEdge('one', 'two')
  .addEdge('two', 'three')
  .addEdge('three', '__end__')
  .compile();
