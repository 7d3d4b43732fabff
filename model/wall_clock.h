/* wall_clock: elapsed real time, for timing what a tool does (never for predictions).
 *
 * Contract: et_wall_seconds() returns seconds of a monotonic clock from an arbitrary origin; only
 * differences mean anything. It cannot fail. */
#ifndef ET_WALL_CLOCK_H
#define ET_WALL_CLOCK_H

double et_wall_seconds(void);

#endif
