/**
 * The frame of every signed-in page: a skip link, the navigation, who the console acts as (tenant
 * and key name), the theme toggle and sign-out.
 */
import * as ToggleGroup from '@radix-ui/react-toggle-group';
import { useQueryClient } from '@tanstack/react-query';
import { Link, Outlet, useNavigate, useRouteContext } from '@tanstack/react-router';
import { useState } from 'react';
import { signOut } from '../api';
import { sessionQuery } from '../session';
import { chooseTheme, storedTheme, type ThemeChoice } from '../theme';

const NAV = [
  { to: '/deployments', label: 'Deployments' },
  { to: '/traces', label: 'Traces' },
  { to: '/status', label: 'Platform status' },
] as const;

export function ThemeToggle() {
  const [choice, setChoice] = useState<ThemeChoice>(storedTheme);
  return (
    <ToggleGroup.Root
      type="single"
      aria-label="Theme"
      value={choice}
      onValueChange={(value) => {
        // Radix answers "" when the pressed item is pressed again: keep the choice.
        if (!value) return;
        setChoice(value as ThemeChoice);
        chooseTheme(value as ThemeChoice);
      }}
      className="flex rounded-md border border-slate-300 text-xs dark:border-slate-600"
    >
      {(['system', 'light', 'dark'] as const).map((value) => (
        <ToggleGroup.Item
          key={value}
          value={value}
          className="px-2 py-1 capitalize text-slate-700 first:rounded-l-md last:rounded-r-md data-[state=on]:bg-slate-800 data-[state=on]:text-white dark:text-slate-200 dark:data-[state=on]:bg-slate-200 dark:data-[state=on]:text-slate-900"
        >
          {value}
        </ToggleGroup.Item>
      ))}
    </ToggleGroup.Root>
  );
}

export function Shell() {
  const { session } = useRouteContext({ from: '/signed-in' });
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [leaving, setLeaving] = useState(false);
  const leave = async () => {
    setLeaving(true);
    try {
      await signOut();
    } finally {
      queryClient.clear();
      queryClient.setQueryData(sessionQuery.queryKey, null);
      await navigate({ to: '/sign-in' });
    }
  };
  return (
    <div className="min-h-screen bg-slate-50 text-slate-900 dark:bg-slate-950 dark:text-slate-100">
      <a href="#main" className="sr-only focus:not-sr-only focus:absolute focus:left-2 focus:top-2 focus:rounded focus:bg-white focus:p-2 focus:text-slate-900">
        Skip to content
      </a>
      <header className="border-b border-slate-200 bg-white dark:border-slate-800 dark:bg-slate-900">
        <div className="mx-auto flex max-w-7xl items-center gap-6 px-4 py-2">
          <Link to="/deployments" className="font-semibold tracking-tight">
            Berth
          </Link>
          <nav aria-label="Main">
            <ul className="flex gap-1">
              {NAV.map((item) => (
                <li key={item.to}>
                  <Link
                    to={item.to}
                    className="rounded px-3 py-1.5 text-sm text-slate-700 hover:bg-slate-100 dark:text-slate-300 dark:hover:bg-slate-800"
                    activeProps={{ 'aria-current': 'page', className: 'bg-slate-100 font-medium text-slate-900 dark:bg-slate-800 dark:text-white' }}
                  >
                    {item.label}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
          <div className="ml-auto flex items-center gap-4 text-sm">
            <ThemeToggle />
            <p className="text-slate-700 dark:text-slate-300" data-testid="identity">
              Tenant <code className="font-mono text-xs">{session.tenant_id}</code> · key <span className="font-medium">{session.key_name}</span>
            </p>
            <button
              type="button"
              onClick={() => void leave()}
              disabled={leaving}
              className="rounded-md border border-slate-300 px-3 py-1 hover:bg-slate-100 dark:border-slate-600 dark:hover:bg-slate-800"
            >
              Sign out
            </button>
          </div>
        </div>
      </header>
      <main id="main" tabIndex={-1} className="mx-auto max-w-7xl px-4 py-6 outline-none">
        <Outlet />
      </main>
    </div>
  );
}
