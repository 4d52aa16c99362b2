// A page for protocol-browser.test.ts (browser code: typechecked by tsconfig.pages.json): the
// @langchain/react `useStream` hook against an agent server given in the query string —
// `api`, `assistant`, `transport` (sse | websocket), `thread` (rejoin it); `#send` submits the JSON in `#input`,
// `#edit` submits it forked from the parent checkpoint of the last message (`#fork-from`).
import { useMessageMetadata, useStream } from '@langchain/react';
import { useEffect, useRef } from 'react';
import { createRoot } from 'react-dom/client';

const query = new URLSearchParams(location.search);
const transport = query.get('transport') === 'websocket' ? 'websocket' : 'sse';

function App() {
  const stream = useStream<Record<string, unknown>>({
    apiUrl: query.get('api')!,
    assistantId: query.get('assistant')!,
    transport,
    threadId: query.get('thread'),
  });
  const texts = stream.messages.map((m) => m.text);
  // Redoing the last turn: a fork from the checkpoint its last message was streamed on.
  const lastMeta = useMessageMetadata(stream, stream.messages.at(-1)?.id);
  // Every text the last message had while it streamed: the partial ones show the tokens arrived one by one.
  const partials = useRef<string[]>([]);
  const last = texts.at(-1);
  useEffect(() => {
    if (last !== undefined && partials.current.at(-1) !== last) partials.current.push(last);
  }, [last]);
  return (
    <div>
      <div id="thread">{stream.threadId ?? ''}</div>
      <div id="loading">{stream.isLoading ? 'yes' : 'no'}</div>
      <div id="messages">{texts.join('|')}</div>
      <div id="partials">{partials.current.join('|')}</div>
      <div id="values">{JSON.stringify(stream.values ?? {})}</div>
      <div id="interrupt">{stream.interrupt ? JSON.stringify(stream.interrupt.value) : ''}</div>
      <div id="error">{stream.error ? String(stream.error) : ''}</div>
      <input id="input" />
      <button id="send" onClick={() => void stream.submit(JSON.parse((document.getElementById('input') as HTMLInputElement).value) as Record<string, unknown>)}>
        send
      </button>
      <div id="fork-from">{lastMeta?.parentCheckpointId ?? ''}</div>
      <button
        id="edit"
        onClick={() =>
          void stream.submit(JSON.parse((document.getElementById('input') as HTMLInputElement).value) as Record<string, unknown>, {
            forkFrom: lastMeta!.parentCheckpointId!,
          })
        }
      >
        edit
      </button>
      <button id="respond" onClick={() => void stream.respond('yes')}>
        respond
      </button>
    </div>
  );
}

createRoot(document.getElementById('root')!).render(<App />);
