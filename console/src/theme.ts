/**
 * Light and dark themes: the system's by default, or the one chosen with the toggle (remembered in
 * localStorage — a display preference, nothing secret). Applied as `data-theme` on <html>.
 */
export type ThemeChoice = 'system' | 'light' | 'dark';

const STORAGE_KEY = 'berth-theme';
const dark = window.matchMedia('(prefers-color-scheme: dark)');

export function storedTheme(): ThemeChoice {
  const value = localStorage.getItem(STORAGE_KEY);
  return value === 'light' || value === 'dark' ? value : 'system';
}

function apply(choice: ThemeChoice): void {
  const resolved = choice === 'system' ? (dark.matches ? 'dark' : 'light') : choice;
  document.documentElement.dataset.theme = resolved;
}

export function chooseTheme(choice: ThemeChoice): void {
  if (choice === 'system') localStorage.removeItem(STORAGE_KEY);
  else localStorage.setItem(STORAGE_KEY, choice);
  apply(choice);
}

/** Applies the stored choice now and follows the system's changes while it is "system". */
export function initTheme(): void {
  apply(storedTheme());
  dark.addEventListener('change', () => apply(storedTheme()));
}
