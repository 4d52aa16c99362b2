/**
 * Pieces of the A2A tests (a2a.test.ts, a2a-push.test.ts): messages as `@a2a-js/sdk` takes them,
 * and reading its answers.
 */
import { randomUUID } from 'node:crypto';
import { Role, type Message, type Task } from '@a2a-js/sdk';

/** A user's text message (a new context unless `extra` names one). */
export const userText = (text: string, extra: Partial<Message> = {}): Message => ({
  messageId: randomUUID(),
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
  ...extra,
});

/** SendMessage's answer as a task (the server always answers with one). */
export const asTask = (result: Task | Message): Task => {
  if (!('status' in result)) throw new Error(`expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
};
