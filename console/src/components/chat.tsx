/**
 * Chat messages as LangChain and OpenAI write them into traces, rendered as a conversation:
 * `{role, content}` (OpenAI), `{type: "human" | "ai" | …, content}` (LangChain's dict form), the
 * serialized `{lc: 1, type: "constructor", id: [..., "AIMessage"], kwargs}` form, with content a
 * string or a list of blocks (text, image, audio, file, tool use), and tool calls. A block that is
 * not text — an image above all — is a labelled placeholder with its size: nothing is fetched, no
 * data URL reaches the DOM.
 */
import type { ReactNode } from 'react';
import { base64Bytes, dataUrlInfo, formatBytes, JsonTree, LongText } from './json-tree';

export interface ChatMessage {
  role: string;
  name?: string;
  content: unknown;
  toolCalls: unknown[];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const ROLES: Record<string, string> = {
  human: 'user',
  user: 'user',
  humanmessage: 'user',
  humanmessagechunk: 'user',
  ai: 'assistant',
  assistant: 'assistant',
  aimessage: 'assistant',
  aimessagechunk: 'assistant',
  system: 'system',
  developer: 'system',
  systemmessage: 'system',
  tool: 'tool',
  function: 'tool',
  toolmessage: 'tool',
  functionmessage: 'tool',
  chat: 'chat',
  chatmessage: 'chat',
};

/** One message in any of the shapes above, or undefined when `value` is not one. */
export function asMessage(value: unknown): ChatMessage | undefined {
  if (!isObj(value)) return undefined;
  let fields: Obj = value;
  let role: string | undefined;
  if (value.lc === 1 && value.type === 'constructor' && Array.isArray(value.id) && isObj(value.kwargs)) {
    role = ROLES[String(value.id.at(-1)).toLowerCase()];
    fields = value.kwargs;
  } else if (typeof value.role === 'string') role = ROLES[value.role.toLowerCase()] ?? value.role;
  else if (typeof value.type === 'string') role = ROLES[value.type.toLowerCase()];
  if (!role || !('content' in fields)) return undefined;
  if (typeof fields.content !== 'string' && !Array.isArray(fields.content) && fields.content !== null) return undefined;
  if (role === 'chat' && typeof fields.role === 'string') role = fields.role;
  const additional = isObj(fields.additional_kwargs) ? fields.additional_kwargs : {};
  const toolCalls = [fields.tool_calls, additional.tool_calls].find((c): c is unknown[] => Array.isArray(c) && c.length > 0) ?? [];
  return { role, ...(typeof fields.name === 'string' ? { name: fields.name } : {}), content: fields.content, toolCalls };
}

function messageList(value: unknown): ChatMessage[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  // A chat model's inputs are a batch of conversations: `[[message, …]]`.
  const flat = value.every(Array.isArray) ? (value as unknown[][]).flat() : value;
  const messages = flat.map(asMessage);
  return messages.length > 0 && messages.every((m) => m !== undefined) ? (messages as ChatMessage[]) : undefined;
}

/**
 * The messages in a run's inputs or outputs and what else is there: a list of messages; `messages`
 * of an object (a chat model's inputs, a graph's state); a chat model's `generations`; OpenAI's
 * `choices`; a single message.
 */
export function findMessages(value: unknown): { messages: ChatMessage[]; rest: Obj | undefined } | undefined {
  const list = messageList(value);
  if (list) return { messages: list, rest: undefined };
  const single = asMessage(value);
  if (single) return { messages: [single], rest: undefined };
  if (!isObj(value)) return undefined;
  for (const key of ['messages', 'generations', 'choices']) {
    let candidate = value[key];
    if (key === 'generations' && Array.isArray(candidate))
      candidate = candidate
        .flat()
        .map((g) => (isObj(g) && g.message ? g.message : isObj(g) && typeof g.text === 'string' ? { role: 'assistant', content: g.text } : g));
    if (key === 'choices' && Array.isArray(candidate)) candidate = candidate.map((c) => (isObj(c) ? c.message : c));
    const messages = messageList(candidate);
    if (!messages) continue;
    const { [key]: _, ...others } = value;
    return { messages, rest: Object.keys(others).length > 0 ? others : undefined };
  }
  return undefined;
}

const ROLE_LABEL: Record<string, string> = { user: 'User', assistant: 'Assistant', system: 'System', tool: 'Tool' };
const ROLE_STYLE: Record<string, string> = {
  user: 'border-blue-300 bg-blue-50 dark:border-blue-800 dark:bg-blue-950',
  assistant: 'border-slate-300 bg-white dark:border-slate-700 dark:bg-slate-900',
  system: 'border-amber-300 bg-amber-50 dark:border-amber-800 dark:bg-amber-950',
  tool: 'border-violet-300 bg-violet-50 dark:border-violet-800 dark:bg-violet-950',
};

/** A placeholder for a block that is not text: what it is and how big. */
function Placeholder({ kind, detail }: { kind: string; detail: string }) {
  return (
    <span
      data-testid="media-placeholder"
      className="my-1 inline-block rounded border border-dashed border-slate-400 px-2 py-1 text-xs text-slate-700 dark:border-slate-500 dark:text-slate-300"
    >
      {kind} · {detail}
    </span>
  );
}

/** What a media block holds: a data URL or base64 `data` (with its size), or a link (its address, not fetched). */
function mediaDetail(block: Obj): string {
  const source = isObj(block.source) ? block.source : block;
  const candidates = [
    block.image_url,
    block.url,
    source.url,
    source.data,
    block.data,
    isObj(block.input_audio) ? block.input_audio.data : undefined,
    isObj(block.file) ? block.file.file_data : undefined,
  ];
  const mime = [block.mime_type, source.media_type, source.mime_type, isObj(block.input_audio) ? block.input_audio.format : undefined].find(
    (m) => typeof m === 'string',
  );
  for (const raw of candidates) {
    const text = isObj(raw) && typeof raw.url === 'string' ? raw.url : raw;
    if (typeof text !== 'string') continue;
    const data = dataUrlInfo(text);
    if (data) return `${data.type}, ${formatBytes(data.bytes)}`;
    if (/^https?:\/\//.test(text)) return `linked: ${text.length > 80 ? `${text.slice(0, 80)}…` : text}`;
    return `${typeof mime === 'string' ? `${mime}, ` : ''}${formatBytes(base64Bytes(text.length))}`;
  }
  return typeof mime === 'string' ? mime : 'no data';
}

const MEDIA: Record<string, string> = {
  image_url: 'Image',
  image: 'Image',
  input_image: 'Image',
  audio: 'Audio',
  input_audio: 'Audio',
  file: 'File',
  input_file: 'File',
  document: 'Document',
  video: 'Video',
};

function Block({ block }: { block: unknown }) {
  if (typeof block === 'string') return <LongText text={block} />;
  if (!isObj(block)) return <JsonTree value={block} />;
  const type = typeof block.type === 'string' ? block.type : '';
  if ((type === 'text' || type === 'input_text' || type === 'output_text') && typeof block.text === 'string') return <LongText text={block.text} />;
  const media = MEDIA[type];
  if (media) return <Placeholder kind={media} detail={mediaDetail(block)} />;
  if (type === 'tool_use' || type === 'tool_call') return <ToolCall call={block} />;
  return <JsonTree value={block} label={type || 'block'} />;
}

function ToolCall({ call }: { call: unknown }) {
  const c = isObj(call) ? call : {};
  const fn = isObj(c.function) ? c.function : {};
  const name = [c.name, fn.name].find((n) => typeof n === 'string') ?? 'tool';
  let args: unknown = c.args ?? c.input ?? fn.arguments;
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      // Arguments a model wrote that are not JSON are shown as the text they are.
    }
  }
  return (
    <div className="mt-1 rounded border border-slate-300 p-2 dark:border-slate-700">
      <p className="text-xs font-medium">Calls {String(name)}</p>
      <JsonTree value={args} label="arguments" />
    </div>
  );
}

function Content({ content }: { content: unknown }): ReactNode {
  if (typeof content === 'string') return <LongText text={content} />;
  if (Array.isArray(content))
    return content.map((block, i) => (
      <div key={i}>
        <Block block={block} />
      </div>
    ));
  return null;
}

/** The messages as a conversation: each one's role, content and tool calls. */
export function Chat({ messages }: { messages: ChatMessage[] }) {
  return (
    <ol className="space-y-2" aria-label="Messages">
      {messages.map((m, i) => (
        <li key={i} className={`rounded-md border p-3 text-sm ${ROLE_STYLE[m.role] ?? ROLE_STYLE.assistant}`}>
          <p className="mb-1 text-xs font-semibold text-slate-700 uppercase dark:text-slate-300">
            {ROLE_LABEL[m.role] ?? m.role}
            {m.name ? ` · ${m.name}` : ''}
          </p>
          <Content content={m.content} />
          {m.toolCalls.map((call, j) => (
            <ToolCall key={j} call={call} />
          ))}
        </li>
      ))}
    </ol>
  );
}
