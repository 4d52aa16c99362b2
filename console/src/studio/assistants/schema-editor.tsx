/**
 * A JSON object edited in a form generated from its JSON Schema, or as JSON text (the other view):
 * inputs for strings, numbers, integers, booleans and enums, a fieldset per nested object, a
 * textarea validated as JSON for anything else. Without a schema (or one that is no object with
 * properties), JSON text only. The parent keeps the state, to read the value when it saves.
 */
import { useId } from 'react';
import { Button, inputClass } from '../../components/controls';
import { fieldKind, fromDraft, parseJson, setField, toDraft, type Draft, type FieldError, type JsonSchema, type ObjectDraft, type Parsed } from './json-schema';

export interface EditorState {
  view: 'form' | 'json';
  draft: Draft;
  json: string;
  /** Shown beside their fields (the form) or under the text (JSON), until the next edit of the view. */
  errors: FieldError[];
}

/** A toggle button's look while pressed. */
export const pressedClass = 'aria-pressed:bg-slate-900 aria-pressed:text-white dark:aria-pressed:bg-slate-100 dark:aria-pressed:text-slate-900';

const hasForm = (schema: JsonSchema | null): schema is JsonSchema => schema !== null && fieldKind(schema) === 'object';

export function editorState(schema: JsonSchema | null, value: unknown): EditorState {
  return {
    view: hasForm(schema) ? 'form' : 'json',
    draft: hasForm(schema) ? toDraft(schema, value) : undefined,
    json: JSON.stringify(value ?? {}, null, 2),
    errors: [],
  };
}

/** The object the editor holds, or what is wrong with it. */
export function readEditor(schema: JsonSchema | null, state: EditorState): Parsed {
  if (state.view === 'form' && hasForm(schema)) return fromDraft(schema, state.draft);
  const parsed = parseJson(state.json);
  if (parsed.ok && (typeof parsed.value !== 'object' || parsed.value === null || Array.isArray(parsed.value))) {
    return { ok: false, errors: [{ path: [], message: 'Enter a JSON object ({…}).' }] };
  }
  return parsed;
}

export function SchemaEditor({
  title,
  schema,
  state,
  onState,
}: {
  title: string;
  schema: JsonSchema | null;
  state: EditorState;
  onState: (state: EditorState) => void;
}) {
  const id = useId();
  // Switching views carries the value over; a view that holds no valid value stays, its problems shown.
  const switchTo = (view: EditorState['view']) => {
    if (view === state.view || !hasForm(schema)) return;
    const parsed = readEditor(schema, state);
    if (!parsed.ok) return onState({ ...state, errors: parsed.errors });
    onState(
      view === 'json'
        ? { view, draft: state.draft, json: JSON.stringify(parsed.value, null, 2), errors: [] }
        : { view, draft: toDraft(schema, parsed.value), json: state.json, errors: [] },
    );
  };
  const jsonErrors = state.view === 'json' ? state.errors : [];
  return (
    <fieldset className="space-y-3 rounded-md border border-slate-300 p-3 dark:border-slate-700">
      <legend className="px-1 text-sm font-medium">{title}</legend>
      {hasForm(schema) ? (
        <div role="group" aria-label={`${title}: view`} className="flex gap-1">
          {(['form', 'json'] as const).map((view) => (
            <Button key={view} className={`px-2 py-0.5 text-xs ${pressedClass}`} aria-pressed={state.view === view} onClick={() => switchTo(view)}>
              {view === 'form' ? 'Form' : 'JSON'}
            </Button>
          ))}
        </div>
      ) : null}
      {state.view === 'form' && hasForm(schema) ? (
        <ObjectFields
          schema={schema}
          draft={state.draft as ObjectDraft}
          path={[]}
          idPrefix={id}
          errors={state.errors}
          onChange={(path, value) =>
            onState({ ...state, draft: setField(state.draft, path, value), errors: state.errors.filter((e) => !samePath(e.path, path)) })
          }
        />
      ) : (
        <div className="space-y-1">
          <label htmlFor={`${id}-json`} className="block text-sm font-medium">
            {title} (JSON)
          </label>
          <textarea
            id={`${id}-json`}
            value={state.json}
            onChange={(e) => onState({ ...state, json: e.target.value, errors: [] })}
            rows={Math.min(16, Math.max(4, state.json.split('\n').length + 1))}
            spellCheck={false}
            aria-invalid={jsonErrors.length > 0}
            aria-describedby={jsonErrors.length > 0 ? `${id}-json-error` : undefined}
            className={`${inputClass} w-full font-mono`}
          />
          <FieldMessage id={`${id}-json-error`} errors={jsonErrors} />
        </div>
      )}
    </fieldset>
  );
}

const samePath = (a: string[], b: string[]) => a.length === b.length && a.every((key, i) => key === b[i]);

interface FieldsProps {
  idPrefix: string;
  errors: FieldError[];
  onChange: (path: string[], value: Draft) => void;
}

function ObjectFields({ schema, draft, path, ...props }: FieldsProps & { schema: JsonSchema; draft: ObjectDraft; path: string[] }) {
  return (
    <div className="space-y-3">
      {Object.entries(schema.properties!).map(([key, property]) => (
        <Field
          key={key}
          {...props}
          name={key}
          schema={property}
          draft={draft.fields[key]}
          path={[...path, key]}
          required={schema.required?.includes(key) ?? false}
        />
      ))}
    </div>
  );
}

function Field({
  schema,
  name,
  draft,
  path,
  required,
  ...props
}: FieldsProps & { schema: JsonSchema; name: string; draft: Draft; path: string[]; required: boolean }) {
  const kind = fieldKind(schema);
  const id = `${props.idPrefix}-${path.join('.')}`;
  const label = schema.title ?? name;
  const errors = props.errors.filter((e) => samePath(e.path, path));
  const invalid = errors.length > 0;
  const described = [schema.description ? `${id}-help` : '', invalid ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  const help = schema.description ? (
    <p id={`${id}-help`} className="text-xs text-slate-700 dark:text-slate-300">
      {schema.description}
    </p>
  ) : null;
  const set = (value: Draft) => props.onChange(path, value);

  if (kind === 'object') {
    return (
      <fieldset className="space-y-3 rounded-md border border-slate-300 p-3 dark:border-slate-700" aria-describedby={described}>
        <legend className="px-1 text-sm font-medium">{label}</legend>
        {help}
        <ObjectFields {...props} schema={schema} draft={draft as ObjectDraft} path={path} />
      </fieldset>
    );
  }
  if (kind === 'boolean') {
    return (
      <div className="space-y-1">
        <div className="flex items-center gap-2">
          <input id={id} type="checkbox" checked={draft === true} onChange={(e) => set(e.target.checked)} aria-describedby={described} className="size-4" />
          <label htmlFor={id} className="text-sm font-medium">
            {label}
          </label>
        </div>
        {help}
      </div>
    );
  }
  const common = { id, 'aria-invalid': invalid, 'aria-describedby': described, 'aria-required': required };
  const placeholder = schema.default === undefined ? undefined : `default: ${JSON.stringify(schema.default)}`;
  let input;
  if (kind === 'enum') {
    input = (
      <select {...common} value={draft as string} onChange={(e) => set(e.target.value)} className={inputClass}>
        <option value="">(not set)</option>
        {schema.enum!.map((option, i) => (
          <option key={i} value={String(i)}>
            {typeof option === 'string' ? option : JSON.stringify(option)}
          </option>
        ))}
      </select>
    );
  } else if (kind === 'json') {
    input = (
      <textarea
        {...common}
        value={draft as string}
        onChange={(e) => set(e.target.value)}
        rows={3}
        spellCheck={false}
        placeholder={placeholder ?? 'JSON'}
        className={`${inputClass} w-full font-mono`}
      />
    );
  } else {
    // Numbers in a text input: what was typed stays visible, and a wrong one is refused with a message.
    input = (
      <input
        {...common}
        type="text"
        inputMode={kind === 'string' ? undefined : kind === 'integer' ? 'numeric' : 'decimal'}
        value={draft as string}
        onChange={(e) => set(e.target.value)}
        placeholder={placeholder}
        className={`${inputClass} w-full`}
      />
    );
  }
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium">
        {label}
        {required ? <span className="text-slate-700 dark:text-slate-300"> (required)</span> : null}{' '}
        <span className="ml-1 font-mono text-xs text-slate-700 dark:text-slate-300">{kind === 'json' ? 'JSON' : kind}</span>
      </label>
      {input}
      {help}
      <FieldMessage id={`${id}-error`} errors={errors} />
    </div>
  );
}

function FieldMessage({ id, errors }: { id: string; errors: FieldError[] }) {
  if (errors.length === 0) return null;
  return (
    <p id={id} className="text-sm text-red-700 dark:text-red-300">
      {errors.map((e) => e.message).join(' ')}
    </p>
  );
}
