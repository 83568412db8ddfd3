/*
 * array.h - TS_ARRAY_LEN(a): the number of elements of the array a. Given a
 * pointer, the build fails (-Wsizeof-pointer-div, with -Werror).
 */
#ifndef TS_API_ARRAY_H
#define TS_API_ARRAY_H

#define TS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* TS_API_ARRAY_H */
