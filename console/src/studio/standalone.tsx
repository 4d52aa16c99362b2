/**
 * Studio alone, as `berth dev`'s agent server serves it at `/studio` (index.html then carries
 * `<meta name="berth-console" content="studio">`): its own origin's API, no sign-in (the
 * developer's own local server takes none, as its API takes none), no console pages around it.
 */
import { ThemeToggle } from '../components/shell';
import { PageTitle } from '../components/ui';
import { LazyStudio } from './lazy';

const target = { apiUrl: location.origin, headers: {}, key: 'local' };

/** Whether this page is `berth dev`'s Studio rather than the gateway's console. */
export const standaloneStudio = document.querySelector<HTMLMetaElement>('meta[name="berth-console"]')?.content === 'studio';

export function StandaloneStudio() {
  return (
    <div className="min-h-screen bg-slate-50 text-slate-900 dark:bg-slate-950 dark:text-slate-100">
      <main className="mx-auto max-w-7xl p-6">
        <div className="mb-4 flex flex-wrap items-baseline gap-3">
          <PageTitle>Studio</PageTitle>
          <span className="font-mono text-sm text-slate-700 dark:text-slate-300">{location.origin}</span>
          <span className="ml-auto">
            <ThemeToggle />
          </span>
        </div>
        <LazyStudio target={target} />
      </main>
    </div>
  );
}
