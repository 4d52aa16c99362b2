/** The Threads tab's form controls (the Graph tab's look). */
export const inputClass = 'rounded-md border border-slate-400 bg-white px-2 py-1 text-sm dark:border-slate-500 dark:bg-slate-900';
export const buttonClass = 'rounded-md bg-slate-900 px-3 py-1.5 text-sm font-medium text-white disabled:opacity-60 dark:bg-slate-100 dark:text-slate-900';
export const secondaryButtonClass =
  'rounded-md border border-slate-400 px-3 py-1.5 text-sm font-medium disabled:opacity-60 hover:bg-slate-100 dark:border-slate-500 dark:hover:bg-slate-800';
