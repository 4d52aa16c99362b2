/**
 * A graph for Studio's Assistants tests: its context schema has a field of every shape the form
 * generates an input for (string, number, integer, boolean, enum, a nested object) and one it edits
 * as JSON (an array). Its reply is the context the run was given, so a run shows which assistant
 * version ran.
 */
import { AIMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
import { z } from 'zod';

const Context = z.object({
  greeting: z.string().describe('How the reply starts').optional(),
  temperature: z.number().optional(),
  max_turns: z.number().int().optional(),
  verbose: z.boolean().optional(),
  tone: z.enum(['plain', 'warm']).optional(),
  limits: z.object({ tokens: z.number().int().optional() }).optional(),
  tags: z.array(z.string()).optional(),
});

export const greeter = new StateGraph(new StateSchema({ messages: MessagesValue }), { context: Context })
  .addNode('reply', (_state, runtime) => ({ messages: [new AIMessage(`context: ${JSON.stringify(runtime.context ?? {})}`)] }))
  .addEdge('__start__', 'reply')
  .addEdge('reply', '__end__')
  .compile();
