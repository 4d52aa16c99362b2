/**
 * One graph per way LangGraph.js accepts a context schema, all with the same context keys
 * (`model`: string, `temperature`: number, optional). The node `n` writes the context it was given
 * (`runtime.context`) to `seen`, so tests can see what reached the graph.
 */
import { Annotation, StateGraph, StateSchema, type Runtime } from '@langchain/langgraph';
import { z } from 'zod';
import { z as z3 } from 'zod/v3';

const State = Annotation.Root({ seen: Annotation<unknown> });
type Context = { model?: string; temperature?: number };

const seen = (_state: unknown, runtime: Runtime<Context>) => ({ seen: runtime.context ?? null });

/** Annotation.Root as the second argument of StateGraph. */
export const annotation = new StateGraph(State, Annotation.Root({ model: Annotation<string>, temperature: Annotation<number> }))
  .addNode('n', seen)
  .addEdge('__start__', 'n')
  .compile();

/** zod 4 (`zod`) object as `context`. */
export const zod4 = new StateGraph(State, { context: z.object({ model: z.string().optional(), temperature: z.number().optional() }) })
  .addNode('n', seen)
  .addEdge('__start__', 'n')
  .compile();

/** zod 3 (`zod/v3`) object as `context`. */
export const zod3 = new StateGraph(State, { context: z3.object({ model: z3.string().optional(), temperature: z3.number().optional() }) })
  .addNode('n', seen)
  .addEdge('__start__', 'n')
  .compile();

/** StateSchema as `context`: LangGraph's types accept it (its runtime keeps only zod objects). */
const StateSchemaContext = new StateSchema({ model: z.string().optional(), temperature: z.number().optional() });
export const stateSchema = new StateGraph(State, { context: StateSchemaContext })
  .addNode('n', seen)
  .addEdge('__start__', 'n')
  .compile();
