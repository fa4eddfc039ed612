"""The built-in scheduler: the lead kept by one replica, a tick per lane whenever a
period falls due (never waited on), the ticks running at once, and the pulse: when ticks ran,
who leads, how late due periods start."""
