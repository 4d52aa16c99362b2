/**
 * One store item: read fresh (`getItem`), its value as a tree; edited as JSON and written back
 * (`putItem`: the server embeds it again when the project has an index), deleted after a
 * confirmation (`deleteItem`). And the dialog that puts a new item.
 */
import { useQuery } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { JsonTree } from '../../components/json-tree';
import { ErrorNote, Time } from '../../components/ui';
import { Button, Dialog, inputClass } from '../../components/controls';
import { useStudio } from '../context';
import { describeError } from './errors';
import { JsonField, parseJsonObject, type JsonObject } from './json-field';
import { dotted, storeKey, type ItemRef } from './store';
import { useWrite } from './write';

const pretty = (value: unknown) => JSON.stringify(value, null, 2);

export function ItemPanel({ item, onClose }: { item: ItemRef; onClose: () => void }) {
  const { client, target } = useStudio();
  const read = useQuery({
    queryKey: [...storeKey(target.key), 'item', item.namespace, item.key],
    queryFn: ({ signal }) => client.store.getItem(item.namespace, item.key, { signal }),
  });
  const [editing, setEditing] = useState<string>();
  const [deleting, setDeleting] = useState(false);
  const save = useWrite(
    storeKey(target.key),
    (value: JsonObject) => client.store.putItem(item.namespace, item.key, value),
    () => setEditing(undefined),
  );
  const remove = useWrite(storeKey(target.key), () => client.store.deleteItem(item.namespace, item.key), onClose);
  const parsed = editing === undefined ? undefined : parseJsonObject(editing);
  const headingId = useId();

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (parsed?.value) save.mutate(parsed.value);
  };

  return (
    <section aria-labelledby={headingId} className="min-w-0 space-y-3 rounded-md border border-slate-300 p-4 text-sm dark:border-slate-700">
      <div className="flex items-start gap-2">
        <h2 id={headingId} className="min-w-0 font-mono text-sm font-semibold break-all">
          {item.key}
        </h2>
        <Button className="ml-auto px-2 py-0.5 text-xs" onClick={onClose}>
          Close<span className="sr-only"> item {item.key}</span>
        </Button>
      </div>
      <p className="font-mono text-xs break-all text-slate-700 dark:text-slate-300">{dotted(item.namespace)}</p>
      {read.error ? <ErrorNote error={describeError(read.error)} /> : null}
      {read.data === null ? <p>This item is gone (deleted, or its time to live ran out).</p> : null}
      {read.data ? (
        <>
          <p className="text-xs text-slate-700 dark:text-slate-300">
            Created <Time iso={read.data.createdAt} />, updated <Time iso={read.data.updatedAt} />
          </p>
          {editing === undefined ? (
            <>
              <div data-testid="item-value">
                <JsonTree value={read.data.value} label="value" />
              </div>
              <div className="flex gap-2">
                <Button onClick={() => setEditing(pretty(read.data!.value))}>Edit</Button>
                <Button tone="danger" onClick={() => setDeleting(true)}>
                  Delete
                </Button>
              </div>
            </>
          ) : (
            <form onSubmit={submit} className="space-y-2" aria-label={`Edit item ${item.key}`}>
              <JsonField label="Value (JSON object)" text={editing} onText={setEditing} problem={parsed?.problem} rows={12} />
              {save.error ? <ErrorNote error={describeError(save.error)} /> : null}
              <div className="flex gap-2">
                <Button type="submit" tone="primary" disabled={!parsed?.value || save.isPending}>
                  Save
                </Button>
                <Button onClick={() => setEditing(undefined)}>Cancel</Button>
              </div>
            </form>
          )}
        </>
      ) : null}
      <Dialog open={deleting} title={`Delete item ${item.key}?`} onClose={() => setDeleting(false)}>
        <p>
          The item <span className="font-mono">{item.key}</span> in <span className="font-mono">{dotted(item.namespace)}</span> is deleted from the store, for
          every graph and client of this agent server. This cannot be undone.
        </p>
        {remove.error ? <ErrorNote error={describeError(remove.error)} /> : null}
        <div className="mt-4 flex justify-end gap-2">
          <Button onClick={() => setDeleting(false)}>Cancel</Button>
          <Button tone="danger" disabled={remove.isPending} onClick={() => remove.mutate(undefined)}>
            Delete this item
          </Button>
        </div>
      </Dialog>
    </section>
  );
}

/** A namespace typed as labels joined with dots; why not, when a label is empty. */
function parseNamespace(text: string): { labels: string[]; problem?: string } {
  const labels = text.split('.');
  if (!text || labels.some((label) => !label)) return { labels, problem: 'One label or more, separated by dots (users.alice); none empty' };
  return { labels };
}

/** Puts a new item (or replaces the one at that namespace and key), then opens it. */
export function NewItemDialog({
  open,
  namespace,
  onClose,
  onCreated,
}: {
  open: boolean;
  /** The namespace the form starts with (the one open in the tab). */
  namespace: string[];
  onClose: () => void;
  onCreated: (item: ItemRef) => void;
}) {
  return (
    <Dialog open={open} title="New item" onClose={onClose}>
      {/* Mounted while open only: each opening starts from the tab's namespace. */}
      {open ? <NewItemForm namespace={namespace} onClose={onClose} onCreated={onCreated} /> : null}
    </Dialog>
  );
}

function NewItemForm({ namespace, onClose, onCreated }: { namespace: string[]; onClose: () => void; onCreated: (item: ItemRef) => void }) {
  const { client, target } = useStudio();
  const [space, setSpace] = useState(dotted(namespace));
  const [key, setKey] = useState('');
  const [value, setValue] = useState('{}');
  const ns = parseNamespace(space);
  const parsed = parseJsonObject(value);
  const put = useWrite(
    storeKey(target.key),
    (item: ItemRef & { value: JsonObject }) => client.store.putItem(item.namespace, item.key, item.value),
    (item) => {
      onCreated({ namespace: item.namespace, key: item.key });
      onClose();
    },
  );
  const spaceId = useId();
  const keyId = useId();
  const ready = !ns.problem && key !== '' && parsed.value !== undefined;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (ready) put.mutate({ namespace: ns.labels, key, value: parsed.value! });
  };
  return (
    <form onSubmit={submit} className="space-y-3" aria-label="New item">
      <div className="space-y-1">
        <label htmlFor={spaceId} className="block text-sm font-medium">
          Namespace
        </label>
        <input
          id={spaceId}
          value={space}
          onChange={(e) => setSpace(e.target.value)}
          aria-invalid={space !== '' && ns.problem ? true : undefined}
          aria-describedby={`${spaceId}-note`}
          className={`${inputClass} w-full font-mono`}
        />
        <p id={`${spaceId}-note`} className="text-xs text-slate-700 dark:text-slate-300">
          {ns.problem ?? 'Labels separated by dots.'}
        </p>
      </div>
      <div className="space-y-1">
        <label htmlFor={keyId} className="block text-sm font-medium">
          Key
        </label>
        <input id={keyId} value={key} onChange={(e) => setKey(e.target.value)} className={`${inputClass} w-full font-mono`} />
      </div>
      <JsonField label="Value (JSON object)" text={value} onText={setValue} problem={parsed.problem} rows={8} />
      {put.error ? <ErrorNote error={describeError(put.error)} /> : null}
      <div className="flex justify-end gap-2">
        <Button onClick={onClose}>Cancel</Button>
        <Button type="submit" tone="primary" disabled={!ready || put.isPending}>
          Put item
        </Button>
      </div>
    </form>
  );
}
