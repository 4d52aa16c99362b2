/**
 * A browser chat app as the current official React hook builds them (`useStream` of
 * `@langchain/react` 1.x, protocol v2), talking to a deployment through the gateway from its own
 * origin with an API key — the README's "A browser app talking to a deployment" code. Query: `api`
 * (the deployment URL), `key`, `transport` (sse | websocket), `thread` (kept in the URL once made,
 * so a reload rejoins the thread). Renders the messages, the pending interrupt with an approve
 * button, `#partials` (how many distinct texts the newest AI message had while it streamed), and a
 * composer that sends (`#compose button[type=submit]`) or sends instead of the last message
 * (`#redo`: a fork from the checkpoint before it).
 */
import { useMessageMetadata, useStream } from '@langchain/react';
import { useEffect, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.search);
const apiUrl = params.get('api')!;
const key = params.get('key')!;
const threadId = params.get('thread');

// Over SSE every call is a fetch: the key goes as a header. A browser cannot set headers on a
// WebSocket (and the SDK refuses defaultHeaders with it): the key goes as the gateway's
// subprotocol, and the few plain HTTP calls (the thread's state on load) get it from a fetch.
const credentials =
  params.get('transport') === 'websocket'
    ? {
        transport: 'websocket' as const,
        webSocketFactory: (url: string) => new WebSocket(url, ['berth', `berth.api-key.${key}`]),
        callerOptions: {
          fetch: (input: RequestInfo | URL, init?: RequestInit) => {
            const headers = new Headers(init?.headers);
            headers.set('x-api-key', key);
            return fetch(input, { ...init, headers });
          },
        },
      }
    : { transport: 'sse' as const, defaultHeaders: { 'x-api-key': key } };

function Chat() {
  const stream = useStream<Record<string, unknown>, { question: string }>({ apiUrl, assistantId: 'chat', threadId, ...credentials });
  useEffect(() => {
    if (!stream.threadId) return;
    const url = new URL(location.href);
    url.searchParams.set('thread', stream.threadId);
    history.replaceState(null, '', url);
  }, [stream.threadId]);
  // Redoing the last turn differently: a new branch from the checkpoint before its last message.
  const forkFrom = useMessageMetadata(stream, stream.messages.at(-1)?.id)?.parentCheckpointId;
  const [text, setText] = useState('');
  const partials = useRef(new Set<string>());
  const [partialCount, setPartialCount] = useState(0);
  const last = stream.messages.at(-1);
  const lastAi = last?.type === 'ai' ? last.text : undefined;
  useEffect(() => {
    if (lastAi === undefined || !stream.isLoading) return;
    partials.current.add(lastAi);
    setPartialCount(partials.current.size);
  }, [lastAi, stream.isLoading]);
  const send = (fork?: { forkFrom: string }) => {
    partials.current = new Set();
    void stream.submit({ messages: [{ type: 'human', content: text }] }, fork);
    setText('');
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
              {message.type}: {message.text}
            </span>
          </li>
        ))}
      </ul>
      {stream.interrupt ? (
        <div id="interrupt">
          <span className="question">{stream.interrupt.value?.question}</span>
          <button id="approve" onClick={() => void stream.respond('yes')}>
            approve
          </button>
        </div>
      ) : null}
      <form
        id="compose"
        onSubmit={(event) => {
          event.preventDefault();
          send();
        }}
      >
        <input id="text" value={text} onChange={(event) => setText(event.target.value)} />
        <button type="submit">send</button>
        <button id="redo" type="button" disabled={!forkFrom} onClick={() => send({ forkFrom: forkFrom! })}>
          send instead
        </button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')!).render(<Chat />);
