/**
 * Graphs of the MCP tests. `add` has a typed input (`a`, `b`: numbers; `note`: optional string) and
 * answers `{sum, note}`; `fail` throws `Error("the tool broke: <reason>")` with its input's `reason`.
 */
import { StateGraph } from '@langchain/langgraph';
import { z } from 'zod';

const AddInput = z.object({
  a: z.number().describe('first addend'),
  b: z.number().describe('second addend'),
  note: z.string().optional(),
});
const AddOutput = z.object({ sum: z.number(), note: z.string().optional() });
const AddState = AddInput.extend({ sum: z.number().optional() });

export const add = new StateGraph({ state: AddState, input: AddInput, output: AddOutput })
  .addNode('add', (state: z.infer<typeof AddState>) => ({ sum: state.a + state.b }))
  .addEdge('__start__', 'add')
  .addEdge('add', '__end__')
  .compile();

const FailState = z.object({ reason: z.string().optional() });

export const fail = new StateGraph(FailState)
  .addNode('explode', (state: z.infer<typeof FailState>) => {
    throw new Error(`the tool broke: ${state.reason ?? 'no reason'}`);
  })
  .addEdge('__start__', 'explode')
  .addEdge('explode', '__end__')
  .compile();
