/**
 * Sign-in: an API key is exchanged for a session cookie (`POST /v1/auth/session`). The key is read
 * from the field once, on submit, and the field is cleared: it is kept in no state, storage or URL.
 */
import * as Label from '@radix-ui/react-label';
import { useQueryClient } from '@tanstack/react-query';
import { createRoute, redirect, useRouter } from '@tanstack/react-router';
import { useState, type FormEvent } from 'react';
import { ApiError, signIn } from '../api';
import { localPath, rootRoute } from '../routes/root';
import { sessionOrNull, sessionQuery } from '../session';

function SignInPage() {
  const search = signInRoute.useSearch();
  const router = useRouter();
  const queryClient = useQueryClient();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = event.currentTarget;
    const apiKey = String(new FormData(form).get('api_key') ?? '').trim();
    form.reset();
    if (!apiKey) {
      setError('Paste an API key first.');
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      const session = await signIn(apiKey);
      // Nothing read as someone else stays.
      queryClient.clear();
      queryClient.setQueryData(sessionQuery.queryKey, session);
      router.history.push(search.redirect ?? '/deployments');
    } catch (failure) {
      setError(failure instanceof ApiError && failure.status === 401 ? 'That API key is not valid (unknown, revoked or expired).' : String(failure));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="flex min-h-screen items-center justify-center bg-slate-50 p-4 text-slate-900 dark:bg-slate-950 dark:text-slate-100">
      <main className="w-full max-w-md rounded-lg border border-slate-200 bg-white p-8 shadow-sm dark:border-slate-800 dark:bg-slate-900">
        <h1 className="text-xl font-semibold">Sign in to Berth</h1>
        <p className="mt-2 text-sm text-slate-700 dark:text-slate-300">
          Paste an API key of your tenant (<code>berth up</code> prints one). The console exchanges it for a session and does not keep it.
        </p>
        <form onSubmit={(event) => void submit(event)} className="mt-6" noValidate>
          <Label.Root htmlFor="api_key" className="block text-sm font-medium">
            API key
          </Label.Root>
          <input
            id="api_key"
            name="api_key"
            type="password"
            autoComplete="off"
            spellCheck={false}
            required
            aria-invalid={error ? true : undefined}
            aria-describedby={error ? 'sign-in-error' : undefined}
            className="mt-1 w-full rounded-md border border-slate-400 bg-white px-3 py-2 font-mono text-sm dark:border-slate-500 dark:bg-slate-950"
          />
          {error && (
            <p id="sign-in-error" role="alert" className="mt-3 rounded-md bg-red-50 p-2 text-sm text-red-800 dark:bg-red-950 dark:text-red-200">
              {error}
            </p>
          )}
          <button
            type="submit"
            disabled={busy}
            className="mt-4 w-full rounded-md bg-blue-700 px-4 py-2 font-medium text-white hover:bg-blue-800 disabled:opacity-70"
          >
            {busy ? 'Signing in…' : 'Sign in'}
          </button>
        </form>
      </main>
    </div>
  );
}

export const signInRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/sign-in',
  validateSearch: (search: Record<string, unknown>): { redirect?: string } => {
    const to = localPath(search.redirect);
    return to ? { redirect: to } : {};
  },
  // Already signed in: straight on.
  beforeLoad: async ({ context, search }) => {
    if (await sessionOrNull(context.queryClient)) throw redirect({ href: search.redirect ?? '/deployments' });
  },
  component: SignInPage,
});
