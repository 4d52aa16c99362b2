/**
 * Records every execution: the node puts a store item `["executions"] / <tag>:<random>` holding
 * `{tag, pid}` (a run executed twice leaves two items), writes a custom event
 * `{phase: "recorded", pid}`, waits `delay_ms` (default 0) and writes `{phase: "done"}`. The state's
 * `executed_by` is the pid of the process that ran it.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Annotation, StateGraph, type LangGraphRunnableConfig } from '@langchain/langgraph';

const State = Annotation.Root({
  tag: Annotation<string>,
  delay_ms: Annotation<number | undefined>,
  executed_by: Annotation<number>,
});

async function record(state: typeof State.State, config: LangGraphRunnableConfig) {
  if (!config.store) throw new Error('no store in config');
  await config.store.put(['executions'], `${state.tag}:${randomUUID()}`, { tag: state.tag, pid: process.pid });
  config.writer?.({ phase: 'recorded', pid: process.pid });
  await sleep(state.delay_ms ?? 0, undefined, { signal: config.signal });
  config.writer?.({ phase: 'done' });
  return { executed_by: process.pid };
}

export const graph = new StateGraph(State).addNode('record', record).addEdge('__start__', 'record').addEdge('record', '__end__').compile();
