/**
 * A run of one thread, streamed as it happens with the SDK's `runs.stream`: `values` (the state after
 * each step: the state view and the chat follow it), `messages-tuple` (a chat model's tokens as they
 * come, shown until the step's values replace them) and `updates` (where an interrupt shows).
 */
import type { Client, Command } from '@langchain/langgraph-sdk';
import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useRef, useState } from 'react';
import { asMessage } from '../../components/chat';
import { useStudio } from '../context';

/** A message being written: its text so far, by message id. */
export interface PartialMessage {
  id: string;
  role: string;
  text: string;
}

export interface LiveRun {
  /** `running` from the request until the server ends the stream. */
  status: 'idle' | 'running' | 'done' | 'error';
  runId?: string;
  /** The latest `values` event (undefined before the first). */
  values?: unknown;
  /** Messages whose tokens came after the latest `values` event. */
  partial: PartialMessage[];
  error?: string;
}

/** A run's input (null: go on from the checkpoint, `checkpointId` an earlier one to fork from), or a command. */
export type RunRequest = { input: Record<string, unknown> | null; checkpointId?: string } | { command: Command };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A message's id (plain or serialized form), '' without one. */
export function messageId(message: unknown): string {
  if (!isObj(message)) return '';
  const fields = isObj(message.kwargs) ? message.kwargs : message;
  return typeof fields.id === 'string' ? fields.id : '';
}

/** A streamed message chunk as a piece of a message: its id, role and text (a string, or text blocks). */
function chunkPiece(chunk: unknown): PartialMessage | undefined {
  const message = asMessage(chunk);
  if (!message) return undefined;
  const { content } = message;
  const text = Array.isArray(content)
    ? content.map((b) => (isObj(b) && typeof b.text === 'string' ? b.text : typeof b === 'string' ? b : '')).join('')
    : typeof content === 'string'
      ? content
      : '';
  return { id: messageId(chunk), role: message.role, text };
}

/** The query keys a thread's views read (refetched when a run ends). */
export const threadKeys = (key: string, threadId: string) => ({
  state: ['studio', key, 'thread', threadId, 'state'],
  runs: ['studio', key, 'thread', threadId, 'runs'],
  list: ['studio', key, 'threads'],
});

export function useRunStream(client: Client, threadId: string) {
  const { target } = useStudio();
  const queries = useQueryClient();
  const [live, setLive] = useState<LiveRun>({ status: 'idle', partial: [] });
  const running = useRef(false);

  const start = useCallback(
    async (assistantId: string, request: RunRequest) => {
      if (running.current) return;
      running.current = true;
      const run: LiveRun = { status: 'running', partial: [] };
      const show = () => setLive({ ...run, partial: [...run.partial] });
      show();
      const keys = threadKeys(target.key, threadId);
      try {
        const stream = client.runs.stream(threadId, assistantId, {
          ...request,
          streamMode: ['values', 'messages-tuple', 'updates'],
          onRunCreated: ({ run_id }) => {
            run.runId = run_id;
            // The run is on the server now: the runs list shows it (and its Cancel) at once.
            void queries.invalidateQueries({ queryKey: keys.runs });
            show();
          },
        });
        for await (const part of stream) {
          if (part.event === 'values') {
            // The `{__interrupt__}` chunk is not the state: the interrupts come from the thread's state.
            if (isObj(part.data) && '__interrupt__' in part.data) continue;
            run.values = part.data;
            run.partial = [];
          } else if (part.event === 'messages') {
            const [chunk] = part.data as [unknown, unknown];
            const piece = chunkPiece(chunk);
            if (!piece) continue;
            const at = run.partial.find((m) => m.id === piece.id);
            if (at) at.text += piece.text;
            else run.partial.push(piece);
          } else if (part.event === 'metadata') {
            run.runId ??= (part.data as { run_id?: string }).run_id;
          } else if (part.event === 'updates') {
            if (isObj(part.data) && '__interrupt__' in part.data) void queries.invalidateQueries({ queryKey: keys.state });
            continue;
          } else if (part.event === 'error') {
            const data = part.data as { message?: unknown } | undefined;
            throw new Error(String(data?.message ?? JSON.stringify(part.data)));
          } else continue;
          show();
        }
        run.status = 'done';
      } catch (error) {
        run.status = 'error';
        run.error = error instanceof Error ? error.message : String(error);
      } finally {
        // The views show the thread as the server has it now, then stop showing the stream's.
        await Promise.all([keys.state, keys.runs, keys.list].map((queryKey) => queries.invalidateQueries({ queryKey })));
        running.current = false;
        run.partial = [];
        show();
      }
    },
    [client, threadId, target.key, queries],
  );

  return { live, start };
}
