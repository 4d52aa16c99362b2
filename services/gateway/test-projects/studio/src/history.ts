/**
 * A graph for the time travel test: `planner` → `writer` → `reviewer`, each writing its own key (`plan`, `draft`, `review`), so every
 * checkpoint of a run shows one more step done. `write` names the run that wrote the draft: a branch
 * re-run from an earlier checkpoint has a draft of its own, told apart from the first one's.
 */
import { StateGraph, StateSchema } from '@langchain/langgraph';
import { z } from 'zod';

const Story = new StateSchema({
  topic: z.string(),
  plan: z.string().default(''),
  draft: z.string().default(''),
  review: z.string().default(''),
});

export const story = new StateGraph(Story)
  .addNode('planner', (state) => ({ plan: `plan for ${state.topic}` }))
  .addNode('writer', (state, config) => ({ draft: `draft of ${state.plan} by run ${String(config.configurable?.run_id)}` }))
  .addNode('reviewer', (state) => ({ review: `reviewed: ${state.draft}` }))
  .addEdge('__start__', 'planner')
  .addEdge('planner', 'writer')
  .addEdge('writer', 'reviewer')
  .addEdge('reviewer', '__end__')
  .compile();
