/**
 * What a deployment's owner changes besides its code: secrets (names only; values go in and are
 * never shown back), resources and replicas (`PATCH` of `source_config.resource_spec`: no new
 * revision), the run-webhook signing secret (rotated, shown once) and deleting it.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useNavigate } from '@tanstack/react-router';
import { useId, useState, type FormEvent } from 'react';
import { call } from '../../api';
import { ErrorNote } from '../../components/ui';
import { Button, CopyButton, Dialog, inputClass } from '../../components/controls';
import { deploymentPath, keys, type DeploymentDetail, type ResourceSpec, type WebhookSecret } from './types';

function useDeploymentUpdate(deploymentId: string) {
  const queryClient = useQueryClient();
  return (updated: DeploymentDetail) => queryClient.setQueryData(keys.deployment(deploymentId), updated);
}

/** Sets (or replaces) a secret: the value field is a password field, emptied once saved. */
function SecretForm({ deploymentId, name: fixedName, onDone }: { deploymentId: string; name?: string; onDone?: () => void }) {
  const update = useDeploymentUpdate(deploymentId);
  const [name, setName] = useState(fixedName ?? '');
  const [value, setValue] = useState('');
  const id = useId();
  const save = useMutation({
    mutationFn: () => call<DeploymentDetail>(`${deploymentPath(deploymentId)}/secrets/${encodeURIComponent(name)}`, { method: 'PUT', body: { value } }),
    onSuccess: (updated) => {
      update(updated);
      setValue('');
      if (!fixedName) setName('');
      onDone?.();
    },
    // The value is not kept for a second try either.
    onError: () => setValue(''),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  return (
    <form onSubmit={submit} className="flex flex-wrap items-end gap-3 text-sm" aria-label={fixedName ? `Replace ${fixedName}` : 'Set a secret'}>
      {fixedName ? null : (
        <label className="flex flex-col gap-1" htmlFor={`${id}-name`}>
          Name
          <input
            id={`${id}-name`}
            required
            maxLength={128}
            value={name}
            onChange={(e) => setName(e.target.value)}
            className={`${inputClass} font-mono`}
            autoComplete="off"
          />
        </label>
      )}
      <label className="flex flex-col gap-1" htmlFor={`${id}-value`}>
        {fixedName ? `New value of ${fixedName}` : 'Value'}
        <input
          id={`${id}-value`}
          type="password"
          required
          value={value}
          onChange={(e) => setValue(e.target.value)}
          className={inputClass}
          autoComplete="new-password"
        />
      </label>
      <Button type="submit" tone="primary" disabled={save.isPending}>
        {fixedName ? 'Replace' : 'Set secret'}
      </Button>
      {fixedName ? <Button onClick={onDone}>Cancel</Button> : null}
      {save.error ? <ErrorNote error={save.error} /> : null}
    </form>
  );
}

export function Secrets({ deployment }: { deployment: DeploymentDetail }) {
  const update = useDeploymentUpdate(deployment.id);
  const [replacing, setReplacing] = useState<string | null>(null);
  const remove = useMutation({
    mutationFn: (name: string) => call<void>(`${deploymentPath(deployment.id)}/secrets/${encodeURIComponent(name)}`, { method: 'DELETE' }),
    onSuccess: (_, name) => update({ ...deployment, secrets: deployment.secrets.filter((s) => s.name !== name) }),
  });
  return (
    <div className="space-y-4">
      <p className="text-sm text-slate-700 dark:text-slate-300">
        Environment variables of the agent server, stored encrypted. Values are never shown back; a change takes effect when a revision is next deployed.
      </p>
      {deployment.secrets.length === 0 ? (
        <p className="text-sm">No secrets.</p>
      ) : (
        <ul aria-label="Secrets" className="divide-y divide-slate-200 rounded-md border border-slate-300 dark:divide-slate-800 dark:border-slate-700">
          {deployment.secrets.map(({ name }) => (
            <li key={name} className="flex flex-wrap items-center gap-3 px-3 py-2" data-secret={name}>
              <code className="font-mono text-sm">{name}</code>
              <span className="text-xs text-slate-700 dark:text-slate-300">value hidden</span>
              <div className="ml-auto flex gap-2">
                {replacing === name ? null : (
                  <Button className="px-2 py-0.5 text-xs" onClick={() => setReplacing(name)}>
                    Replace<span className="sr-only"> {name}</span>
                  </Button>
                )}
                <Button className="px-2 py-0.5 text-xs" disabled={remove.isPending} onClick={() => remove.mutate(name)}>
                  Remove<span className="sr-only"> {name}</span>
                </Button>
              </div>
              {replacing === name ? (
                <div className="w-full">
                  <SecretForm deploymentId={deployment.id} name={name} onDone={() => setReplacing(null)} />
                </div>
              ) : null}
            </li>
          ))}
        </ul>
      )}
      {remove.error ? <ErrorNote error={remove.error} /> : null}
      <SecretForm deploymentId={deployment.id} />
    </div>
  );
}

const RESOURCE_FIELDS: { key: keyof ResourceSpec; label: string; step: string; min: number }[] = [
  { key: 'cpu', label: 'CPU cores per replica', step: '0.1', min: 0.1 },
  { key: 'memory_mb', label: 'Memory per replica (MB)', step: '1', min: 128 },
  { key: 'min_scale', label: 'Fewest replicas', step: '1', min: 0 },
  { key: 'max_scale', label: 'Most replicas', step: '1', min: 1 },
];

export function Resources({ deployment }: { deployment: DeploymentDetail }) {
  const update = useDeploymentUpdate(deployment.id);
  const spec = deployment.source_config.resource_spec ?? {};
  const [draft, setDraft] = useState<Record<keyof ResourceSpec, string>>(() => ({
    cpu: spec.cpu?.toString() ?? '',
    memory_mb: spec.memory_mb?.toString() ?? '',
    min_scale: spec.min_scale?.toString() ?? '',
    max_scale: spec.max_scale?.toString() ?? '',
  }));
  const save = useMutation({
    mutationFn: () => {
      const resource_spec = Object.fromEntries(
        Object.entries(draft)
          .filter(([, v]) => v !== '')
          .map(([k, v]) => [k, Number(v)]),
      );
      return call<DeploymentDetail>(deploymentPath(deployment.id), { method: 'PATCH', body: { source_config: { resource_spec } } });
    },
    onSuccess: update,
  });
  const id = useId();
  return (
    <form
      className="space-y-3"
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <dl className="grid grid-cols-2 gap-x-6 gap-y-1 text-sm sm:grid-cols-4" data-testid="resource-spec">
        {RESOURCE_FIELDS.map((field) => (
          <div key={field.key}>
            <dt className="text-slate-700 dark:text-slate-300">{field.label}</dt>
            <dd className="font-medium">{spec[field.key] ?? 'platform default'}</dd>
          </div>
        ))}
      </dl>
      <div className="flex flex-wrap items-end gap-3 text-sm">
        {RESOURCE_FIELDS.map((field) => (
          <label key={field.key} htmlFor={`${id}-${field.key}`} className="flex flex-col gap-1">
            {field.label}
            <input
              id={`${id}-${field.key}`}
              type="number"
              step={field.step}
              min={field.min}
              value={draft[field.key]}
              onChange={(e) => setDraft({ ...draft, [field.key]: e.target.value })}
              className={`${inputClass} w-40`}
            />
          </label>
        ))}
        <Button type="submit" tone="primary" disabled={save.isPending}>
          Save resources
        </Button>
      </div>
      <p className="text-sm text-slate-700 dark:text-slate-300">
        Saving changes the deployment&apos;s configuration only: it makes no new revision. The new resources apply when a revision is next deployed.
      </p>
      {save.isSuccess ? (
        <p role="status" className="text-sm">
          Saved.
        </p>
      ) : null}
      {save.error ? <ErrorNote error={save.error} /> : null}
    </form>
  );
}

export function WebhookSecretRotation({ deploymentId }: { deploymentId: string }) {
  const [confirming, setConfirming] = useState(false);
  const [shown, setShown] = useState<WebhookSecret | null>(null);
  const queryClient = useQueryClient();
  const rotate = useMutation({
    mutationFn: () => call<WebhookSecret>(`${deploymentPath(deploymentId)}/webhook-secret`, { method: 'POST', body: {} }),
    onSuccess: (secret) => {
      setConfirming(false);
      setShown(secret);
      void queryClient.invalidateQueries({ queryKey: keys.deployment(deploymentId) });
    },
  });
  return (
    <div className="space-y-3 text-sm">
      <p className="text-slate-700 dark:text-slate-300">
        The deployment&apos;s agent servers sign run webhooks with this secret (Standard Webhooks). Rotating it deploys the serving revision again; the old
        secret signs until that revision is DEPLOYED.
      </p>
      <Button onClick={() => setConfirming(true)}>Rotate the webhook secret</Button>
      <Dialog open={confirming} title="Rotate the webhook secret?" onClose={() => setConfirming(false)}>
        <p>A new secret is made and the serving revision is deployed again with it. Receivers must be given the new secret.</p>
        {rotate.error ? <ErrorNote error={rotate.error} /> : null}
        <div className="mt-4 flex justify-end gap-2">
          <Button onClick={() => setConfirming(false)}>Cancel</Button>
          <Button tone="primary" disabled={rotate.isPending} onClick={() => rotate.mutate()}>
            Rotate
          </Button>
        </div>
      </Dialog>
      {/* Kept in this component's state only: closing the dialog forgets it. */}
      <Dialog open={shown !== null} title="The new webhook secret" onClose={() => setShown(null)}>
        <p role="alert" className="rounded-md bg-amber-50 p-3 text-amber-900 dark:bg-amber-950 dark:text-amber-100">
          Copy it now: it will not be shown again.
        </p>
        <div className="mt-3 flex items-center gap-2">
          <input
            readOnly
            aria-label="New webhook secret"
            value={shown?.secret ?? ''}
            className={`${inputClass} w-full font-mono`}
            data-testid="webhook-secret"
          />
          <CopyButton text={shown?.secret ?? ''} label="Copy the webhook secret" />
        </div>
        <div className="mt-4 flex justify-end">
          <Button tone="primary" onClick={() => setShown(null)}>
            Done
          </Button>
        </div>
      </Dialog>
    </div>
  );
}

export function DeleteDeployment({ deployment }: { deployment: DeploymentDetail }) {
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState('');
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const id = useId();
  const remove = useMutation({
    mutationFn: () => call<void>(deploymentPath(deployment.id), { method: 'DELETE' }),
    onSuccess: async () => {
      queryClient.removeQueries({ queryKey: keys.deployment(deployment.id) });
      await queryClient.invalidateQueries({ queryKey: ['deployments'] });
      await navigate({ to: '/deployments' });
    },
  });
  const close = () => {
    setConfirming(false);
    setTyped('');
  };
  return (
    <div className="space-y-3 text-sm">
      <p className="text-slate-700 dark:text-slate-300">Its agent server stops, and its revisions, logs, secrets and uploads are removed.</p>
      <Button tone="danger" onClick={() => setConfirming(true)}>
        Delete this deployment
      </Button>
      <Dialog open={confirming} title={`Delete ${deployment.name}?`} onClose={close}>
        <form
          onSubmit={(event) => {
            event.preventDefault();
            if (typed === deployment.name) remove.mutate();
          }}
        >
          <label htmlFor={id}>
            This cannot be undone. Type <strong className="font-mono">{deployment.name}</strong> to confirm.
          </label>
          <input id={id} value={typed} onChange={(e) => setTyped(e.target.value)} autoComplete="off" className={`${inputClass} mt-2 w-full font-mono`} />
          {remove.error ? <ErrorNote error={remove.error} /> : null}
          <div className="mt-4 flex justify-end gap-2">
            <Button onClick={close}>Cancel</Button>
            <Button type="submit" tone="danger" disabled={typed !== deployment.name || remove.isPending}>
              Delete
            </Button>
          </div>
        </form>
      </Dialog>
    </div>
  );
}
