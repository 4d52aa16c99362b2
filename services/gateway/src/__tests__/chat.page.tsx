/**
 * A browser chat app as people build them with the classic `useStream` hook of
 * `@langchain/langgraph-sdk/react`, talking to a deployment through the gateway from its own
 * origin with an API key. Query: `api` (the deployment URL), `key`, `thread` (kept in the URL
 * once made, so a reload rejoins the thread). Renders the messages (`type: text`; a human one
 * with a box to edit it, which forks the thread), the pending
 * interrupt with an approve button, and `#partials`: how many distinct texts the newest AI
 * message had while it streamed.
 */
import { useEffect, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';
import type { Checkpoint, Message } from '@langchain/langgraph-sdk';
import { useStream } from '@langchain/langgraph-sdk/react';

const params = new URLSearchParams(location.search);

const textOf = (message: Message) =>
  typeof message.content === 'string' ? message.content : message.content.map((part) => ('text' in part ? part.text : '')).join('');

function Chat() {
  const [threadId, setThreadId] = useState<string | null>(params.get('thread'));
  const stream = useStream<{ messages: Message[] }, { InterruptType: { question: string } }>({
    apiUrl: params.get('api')!,
    assistantId: 'chat',
    defaultHeaders: { 'x-api-key': params.get('key')! },
    messagesKey: 'messages',
    threadId,
    // The checkpoints before each message, for forks.
    fetchStateHistory: true,
    onThreadId: (id) => {
      setThreadId(id);
      const url = new URL(location.href);
      url.searchParams.set('thread', id);
      history.replaceState(null, '', url);
    },
  });
  const [text, setText] = useState('');
  const partials = useRef(new Set<string>());
  const [partialCount, setPartialCount] = useState(0);
  const last = stream.messages.at(-1);
  const lastAi = last?.type === 'ai' ? textOf(last) : undefined;
  useEffect(() => {
    if (lastAi === undefined || !stream.isLoading) return;
    partials.current.add(lastAi);
    setPartialCount(partials.current.size);
  }, [lastAi, stream.isLoading]);

  const send = (content: string, checkpoint?: Omit<Checkpoint, 'thread_id'> | null) => {
    partials.current = new Set();
    void stream.submit({ messages: [{ type: 'human', content }] }, checkpoint ? { checkpoint } : {});
  };

  return (
    <main>
      <div id="status">{stream.isLoading || stream.isThreadLoading ? 'loading' : 'idle'}</div>
      <div id="error">{stream.error ? String(stream.error) : ''}</div>
      <div id="partials">{partialCount}</div>
      <ul id="messages">
        {stream.messages.map((message, index) => (
          <li key={message.id ?? index}>
            <span className="text">
              {message.type}: {textOf(message)}
            </span>
            {message.type === 'human' ? (
              // Edit the message: a new branch from the checkpoint before it.
              <form
                className="fork"
                onSubmit={(event) => {
                  event.preventDefault();
                  const edited = (event.currentTarget.elements.namedItem('edit') as HTMLInputElement).value;
                  send(edited, stream.getMessagesMetadata(message, index)?.firstSeenState?.parent_checkpoint);
                }}
              >
                <input name="edit" />
                <button type="submit">fork</button>
              </form>
            ) : null}
          </li>
        ))}
      </ul>
      {stream.interrupt ? (
        <div id="interrupt">
          <span className="question">{stream.interrupt.value?.question}</span>
          <button id="approve" onClick={() => void stream.submit(null, { command: { resume: 'yes' } })}>
            approve
          </button>
        </div>
      ) : null}
      <form
        id="compose"
        onSubmit={(event) => {
          event.preventDefault();
          send(text);
          setText('');
        }}
      >
        <input id="text" value={text} onChange={(event) => setText(event.target.value)} />
        <button type="submit">send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')!).render(<Chat />);
